"""BeamTrace: the complete record of one beam search, as plain numpy tables.

Hugging Face's generate() keeps only the surviving beams, so pruned hypotheses must be rebuilt by
hand; here every candidate the search looked at is a row: at each step the 2k best extensions of
the k live hypotheses (what beam search actually ranks), with parent, token, scores and what became
of it, plus the top alternatives of every live hypothesis (what it could have said instead). Rows
are numpy structured arrays, so a trace pickles, caches (st.cache_data) and turns into a DataFrame
without torch. The recorder keeps per-step tensors during the search and converts once at the end:
no Python loop over candidates, which keeps the trace cheap next to the search itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

STATUSES = ("forced", "kept", "pruned", "finished", "truncated")
FORCED, KEPT, PRUNED, FINISHED, TRUNCATED = range(len(STATUSES))

CANDIDATE_DTYPE = np.dtype([
    ("step", np.int32),            # output position the token fills (0-based)
    ("rank", np.int16),            # rank among this step's candidates (0 = best cumulative score)
    ("parent", np.int16),          # slot of the live hypothesis it extends (a kept row of step - 1)
    ("slot", np.int16),            # slot it occupies among the live hypotheses after this step, else -1
    ("token", np.int32),
    ("token_logprob", np.float32),
    ("score", np.float32),         # cumulative log-prob of the whole hypothesis
    ("normalized", np.float32),    # score / length_penalty(step + 1)
    ("status", np.int8),           # index into STATUSES
])
ALTERNATIVE_DTYPE = np.dtype([
    ("step", np.int32), ("parent", np.int16), ("rank", np.int16), ("token", np.int32),
    ("token_logprob", np.float32), ("score", np.float32),
])


@dataclass(frozen=True)
class BeamTrace:
    """Every candidate of one sentence's beam search. Rows are ordered by (step, rank).

    A hypothesis is a chain of rows: row r extends the row of step r.step - 1 whose `slot` equals
    r.parent and whose status is kept or forced; step 0 extends BOS. `final` holds the row where
    each returned hypothesis ended (best first), so `path(final[0])` is the best translation.
    """

    candidates: np.ndarray          # CANDIDATE_DTYPE
    alternatives: np.ndarray        # ALTERNATIVE_DTYPE: top trace_top_k next tokens of each live hypothesis
    final: np.ndarray               # int64 row index per returned hypothesis
    beam_size: int
    length_penalty: str
    alpha: float
    prefix: tuple[int, ...]         # forced tokens (status "forced", steps 0..len-1)
    max_len: int
    stop_reason: str                # canonical | early_stopping | max_len

    @property
    def n_steps(self) -> int:
        return int(self.candidates["step"].max()) + 1 if len(self.candidates) else 0

    def at_step(self, step: int) -> np.ndarray:
        return self.candidates[self.candidates["step"] == step]

    def status(self, row: int) -> str:
        return STATUSES[int(self.candidates["status"][row])]

    def path(self, row: int) -> list[int]:
        """Rows from step 0 to `row` along parents."""
        live = np.isin(self.candidates["status"], (KEPT, FORCED))
        index = {(int(s), int(k)): i for i, (s, k) in enumerate(zip(self.candidates["step"][live],
                                                                   self.candidates["slot"][live]))}
        rows_of_live = np.flatnonzero(live)
        out = [int(row)]
        while self.candidates["step"][out[-1]] > 0:
            r = self.candidates[out[-1]]
            out.append(int(rows_of_live[index[(int(r["step"]) - 1, int(r["parent"]))]]))
        return out[::-1]

    def tokens(self, row: int) -> list[int]:
        return [int(t) for t in self.candidates["token"][self.path(row)]]

    def to_dataframe(self, id_to_piece: Callable[[int], str] | None = None):
        """One row per candidate; `status` as text; a `piece` column when `id_to_piece` is given."""
        return _frame(self.candidates, id_to_piece, with_status=True)

    def alternatives_dataframe(self, id_to_piece: Callable[[int], str] | None = None):
        return _frame(self.alternatives, id_to_piece, with_status=False)


def _frame(table: np.ndarray, id_to_piece, with_status: bool):
    import pandas as pd

    frame = pd.DataFrame({name: table[name] for name in table.dtype.names})
    if with_status:
        frame["status"] = pd.Categorical.from_codes(table["status"].astype(np.int64), categories=list(STATUSES))
    if id_to_piece is not None:
        frame.insert(frame.columns.get_loc("token") + 1, "piece", [id_to_piece(int(t)) for t in table["token"]])
    return frame


class TraceRecorder:
    """Collects per-step tensors during beam search (no host sync) and builds BeamTraces at the end."""

    def __init__(self, batch: int, beam_size: int, top_k: int):
        self.batch, self.k, self.top_k = batch, beam_size, top_k
        self.forced_tokens: list[int] = []
        self.forced: dict[str, torch.Tensor] = {}
        self.steps: list[dict[str, torch.Tensor]] = []

    def record_forced(self, prefix: list[int], token_lp: torch.Tensor, score: torch.Tensor,
                      normalized: torch.Tensor, alt_lp: list[torch.Tensor]) -> None:
        """The forced prefix: token_lp / score / normalized [B, P]; alt_lp: P x [B, V] (constrained)."""
        self.forced_tokens = list(prefix)
        self.forced = dict(token_lp=token_lp, score=score, normalized=normalized)
        if self.top_k and prefix:
            before = torch.cat([torch.zeros_like(score[:, :1]), score[:, :-1]], dim=1)   # [B, P]
            tops = [lp.topk(self.top_k, dim=-1) for lp in alt_lp]                      # P x ([B, k], [B, k])
            self.forced["alt_token"] = torch.stack([t.indices for t in tops], dim=1)   # [B, P, k]
            self.forced["alt_lp"] = torch.stack([t.values for t in tops], dim=1)       # [B, P, k]
            self.forced["alt_score"] = before.unsqueeze(2) + self.forced["alt_lp"]     # [B, P, k]

    def record_step(self, prev_scores: torch.Tensor, log_probs: torch.Tensor, cands, status: torch.Tensor,
                    active: torch.Tensor) -> None:
        """One free step: prev_scores [B, K] (before it), log_probs [B*K, V], cands (beam.Candidates)."""
        entry = dict(parent=cands.parent, slot=cands.slot, token=cands.token, token_lp=cands.token_logprob,
                     score=cands.score, normalized=cands.normalized, status=status, active=active.clone())
        if self.top_k:
            top = log_probs.topk(self.top_k, dim=-1)                           # [B*K, k]
            batch, k = prev_scores.shape
            entry["alt_token"] = top.indices.view(batch, k, -1)                # [B, K, k]
            entry["alt_lp"] = top.values.view(batch, k, -1)                    # [B, K, k]
            entry["alt_score"] = prev_scores.unsqueeze(2) + entry["alt_lp"]    # [B, K, k]
        self.steps.append(entry)

    def build(self, final_rows: torch.Tensor, n_final: list[int], stop_reasons: list[str], limits: list[int],
              cfg) -> list[BeamTrace]:
        """final_rows [B, K]: step * 2K + rank of each pooled hypothesis, best first."""
        n_prefix, two_k = len(self.forced_tokens), 2 * self.k
        steps = {key: torch.stack([s[key] for s in self.steps]).cpu().numpy() for key in self.steps[0]}
        forced = {key: value.cpu().numpy() for key, value in self.forced.items()}
        final_rows = final_rows.cpu().numpy()
        traces = []
        for b in range(self.batch):
            active = steps["active"][:, b]                                     # [T]
            n_free = int(active.sum())
            cand = np.zeros(n_prefix + n_free * two_k, dtype=CANDIDATE_DTYPE)
            cand["step"][:n_prefix] = np.arange(n_prefix)
            cand["token"][:n_prefix] = self.forced_tokens
            cand["status"][:n_prefix] = FORCED
            for name, key in (("token_logprob", "token_lp"), ("score", "score"), ("normalized", "normalized")):
                if n_prefix:
                    cand[name][:n_prefix] = forced[key][b]
                cand[name][n_prefix:] = steps[key][active, b].reshape(-1)
            cand["step"][n_prefix:] = np.repeat(np.arange(n_prefix, n_prefix + n_free), two_k)
            cand["rank"][n_prefix:] = np.tile(np.arange(two_k), n_free)
            for name in ("parent", "slot", "token", "status"):
                cand[name][n_prefix:] = steps[name][active, b].reshape(-1)
            alts = self._alternatives(steps, forced, active, b, n_prefix)
            rows = final_rows[b, :n_final[b]]
            final = n_prefix + (rows // two_k - n_prefix) * two_k + rows % two_k
            traces.append(BeamTrace(candidates=cand, alternatives=alts, final=final.astype(np.int64),
                                    beam_size=self.k, length_penalty=cfg.length_penalty, alpha=float(cfg.alpha),
                                    prefix=tuple(self.forced_tokens), max_len=int(limits[b]),
                                    stop_reason=stop_reasons[b]))
        return traces

    def _alternatives(self, steps, forced, active, b: int, n_prefix: int) -> np.ndarray:
        if not self.top_k:
            return np.zeros(0, dtype=ALTERNATIVE_DTYPE)
        n_free, k, top = int(active.sum()), self.k, steps["alt_token"].shape[-1]
        free_scores = steps["alt_score"][active, b]                            # [T_b, K, k]
        live = np.isfinite(free_scores[:, :, 0])                              # [T_b, K]: slots with a hypothesis
        parts = []
        if n_prefix:
            part = np.zeros((n_prefix, top), dtype=ALTERNATIVE_DTYPE)
            part["step"] = np.arange(n_prefix)[:, None]
            part["rank"] = np.arange(top)[None, :]
            part["token"], part["token_logprob"] = forced["alt_token"][b], forced["alt_lp"][b]
            part["score"] = forced["alt_score"][b]
            parts.append(part.reshape(-1))
        part = np.zeros((n_free, k, top), dtype=ALTERNATIVE_DTYPE)
        part["step"] = (n_prefix + np.arange(n_free))[:, None, None]
        part["parent"] = np.arange(k)[None, :, None]
        part["rank"] = np.arange(top)[None, None, :]
        part["token"] = steps["alt_token"][active, b]
        part["token_logprob"] = steps["alt_lp"][active, b]
        part["score"] = free_scores
        parts.append(part[live].reshape(-1))
        return np.concatenate(parts)
