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
from functools import cached_property
from typing import Callable

import numpy as np
import torch

from explorer.decoding.core import length_penalty
from explorer.text.special import DEFAULT_IDS, SpecialIds

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
    each returned hypothesis ended (best first), so `path(final[0])` is the best translation. The
    methods below walk those links (parent_rows, path, best_path, tokens, step_rows,
    alternatives_for), so figures and pages ask the trace instead of resolving slots again.
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

    def step_rows(self, step: int) -> np.ndarray:
        """Row indices of the candidates ranked at `step`, best first. [n] int64"""
        return np.flatnonzero(self.candidates["step"] == step)

    def status(self, row: int) -> str:
        return STATUSES[int(self.candidates["status"][row])]

    def parent_rows(self) -> np.ndarray:
        """Row index of each candidate's parent: the kept (or forced) row of the previous step whose
        slot it names; -1 at step 0, which extends BOS. Resolved once per trace. [N] int64, read-only"""
        return self._parents

    @cached_property
    def _parents(self) -> np.ndarray:
        cand = self.candidates
        live = np.flatnonzero(np.isin(cand["status"], (KEPT, FORCED)))
        index = {(int(cand["step"][r]), int(cand["slot"][r])): int(r) for r in live}
        out = np.full(len(cand), -1, dtype=np.int64)                          # [N]
        for r in np.flatnonzero(cand["step"] > 0):
            out[r] = index.get((int(cand["step"][r]) - 1, int(cand["parent"][r])), -1)
        out.flags.writeable = False
        return out

    def path(self, row: int) -> list[int]:
        """Rows from step 0 to `row` along parents."""
        parents, out = self.parent_rows(), [int(row)]
        while parents[out[-1]] >= 0:
            out.append(int(parents[out[-1]]))
        return out[::-1]

    def best_path(self) -> list[int]:
        """Rows of the best returned hypothesis, step 0 first ([] if nothing was returned)."""
        return self.path(int(self.final[0])) if len(self.final) else []

    def tokens(self, row: int) -> list[int]:
        """The hypothesis that ends at `row`: its tokens from step 0 on (the row's own last)."""
        return [int(t) for t in self.candidates["token"][self.path(row)]]

    def alternatives_for(self, row: int) -> list[tuple[int, float]]:
        """(token, log-prob) the row's parent could have produced at the row's step, best first.

        The union of the recorded top-k alternatives and the ranked candidates from the same parent,
        so the row's own token is always among them.
        """
        cand, alts, parents = self.candidates, self.alternatives, self.parent_rows()
        step, parent = int(cand["step"][row]), int(cand["parent"][row])
        found: dict[int, float] = {}
        mask = (alts["step"] == step) & (alts["parent"] == parent)
        for token, lp in zip(alts["token"][mask], alts["token_logprob"][mask]):
            found[int(token)] = float(lp)
        for r in np.flatnonzero((cand["step"] == step) & (parents == parents[row])):
            found.setdefault(int(cand["token"][r]), float(cand["token_logprob"][r]))
        return sorted(found.items(), key=lambda item: -item[1])

    def to_dataframe(self, id_to_piece: Callable[[int], str] | None = None):
        """One row per candidate; `status` as text; a `piece` column when `id_to_piece` is given."""
        return _frame(self.candidates, id_to_piece, with_status=True)

    def alternatives_dataframe(self, id_to_piece: Callable[[int], str] | None = None):
        return _frame(self.alternatives, id_to_piece, with_status=False)


def _frame(table: np.ndarray, id_to_piece, with_status: bool):
    import pandas as pd   # here: heavy to import, and only the app's tables need it

    frame = pd.DataFrame({name: table[name] for name in table.dtype.names})
    if with_status:
        frame["status"] = pd.Categorical.from_codes(table["status"].astype(np.int64), categories=list(STATUSES))
    if id_to_piece is not None:
        frame.insert(frame.columns.get_loc("token") + 1, "piece", [id_to_piece(int(t)) for t in table["token"]])
    return frame


class TraceRecorder:
    """Keeps references to each step's tensors during beam search (the alternatives are the
    search's own per-hypothesis top-k) and turns them into BeamTraces at the end, all steps at
    once in numpy."""

    def __init__(self, batch: int, beam_size: int, cfg, prefix: list[int], forced_lp: torch.Tensor,
                 first: torch.Tensor, special: SpecialIds = DEFAULT_IDS):
        """forced_lp [B, P]: log-probs of the forced prefix; first [B*K, P+1, V]: start()'s output;
        special: the model's ids (which constrain() banned)."""
        self.batch, self.k, self.cfg, self.top_k = batch, beam_size, cfg, cfg.trace_top_k
        self.prefix = list(prefix)
        self.forced_lp = forced_lp
        self.steps: list[dict] = []
        self.forced_alt = None
        if self.top_k and prefix:
            rows = first.view(batch, beam_size, len(prefix) + 1, -1)[:, 0, :-1].clone()   # [B, P, V]
            rows[:, :, list(special.never_output)] = float("-inf")              # as constrain() bans them
            rows[:, :min(cfg.min_len, len(prefix)), special.eos] = float("-inf")   # EOS before min_len
            self.forced_alt = rows.topk(self.top_k, dim=-1)                     # 2 x [B, P, k]

    def record_step(self, prev_scores: torch.Tensor, cands, pick: torch.Tensor,
                    at_limit: torch.Tensor | None, active: torch.Tensor) -> None:
        """prev_scores [B, K] (before the step), cands (beam.Candidates, made with width >= top_k:
        its row_best holds each hypothesis's best next tokens), pick [B, K]."""
        entry = dict(score=cands.score, parent=cands.parent, token=cands.token, token_lp=cands.token_logprob,
                     finished=cands.finished, pick=pick, at_limit=at_limit, active=active)
        if self.top_k:
            values, indices = cands.row_best                                  # 2 x [B*K, M], M >= top_k
            entry["alt"] = (values[:, :self.top_k], indices[:, :self.top_k])  # 2 x [B*K, k]
            entry["prev_scores"] = prev_scores
        self.steps.append(entry)

    def build(self, pool_step: np.ndarray, pool_rank: np.ndarray, n_final: list[int], stop_reasons: list[str],
              limits: list[int]) -> list[BeamTrace]:
        """pool_step / pool_rank [B, K]: where each returned hypothesis (best first) ended."""
        n_prefix, k, two_k, cfg = len(self.prefix), self.k, 2 * self.k, self.cfg
        stack = lambda key: _np(torch.stack([s[key] for s in self.steps]))   # noqa: E731  -> [T, B, ...]
        score, token_lp = stack("score"), stack("token_lp")                   # [T, B, 2K]
        parent, token, pick, active = stack("parent"), stack("token"), stack("pick"), stack("active")
        n_steps = len(self.steps)
        no_limit = torch.zeros(self.batch, dtype=torch.bool)
        at_limit = _np(torch.stack([no_limit if s["at_limit"] is None else s["at_limit"].cpu()
                                    for s in self.steps]))                    # [T, B]
        slot = np.full(score.shape, -1, dtype=np.int64)                       # [T, B, 2K]
        np.put_along_axis(slot, pick, np.broadcast_to(np.arange(k), pick.shape), axis=2)
        status = np.where(slot >= 0, np.where(at_limit[:, :, None], TRUNCATED, KEPT), PRUNED)   # [T, B, 2K]
        status[:, :, :k][stack("finished")] = FINISHED
        steps_abs = n_prefix + np.arange(n_steps)                              # [T]
        normalized = score / np.asarray(length_penalty(steps_abs + 1.0, cfg.length_penalty, cfg.alpha)).reshape(-1, 1, 1)
        forced = self._forced_arrays()
        alts = self._alternative_arrays(steps_abs) if self.top_k else None
        traces = []
        for b in range(self.batch):
            live = active[:, b]                                               # [T] a prefix of the steps
            n_free = int(live.sum())
            cand = np.zeros(n_prefix + n_free * two_k, dtype=CANDIDATE_DTYPE)
            cand[:n_prefix] = forced[b]
            free = cand[n_prefix:]
            free["step"] = np.repeat(steps_abs[live], two_k)
            free["rank"] = np.tile(np.arange(two_k), n_free)
            for name, values in (("parent", parent), ("slot", slot), ("token", token), ("token_logprob", token_lp),
                                 ("score", score), ("normalized", normalized), ("status", status)):
                free[name] = values[live, b].reshape(-1)
            final = n_prefix + (pool_step[b, :n_final[b]] - n_prefix) * two_k + pool_rank[b, :n_final[b]]
            traces.append(BeamTrace(candidates=cand, alternatives=self._alternatives_of(alts, b, live),
                                    final=final.astype(np.int64), beam_size=k, length_penalty=cfg.length_penalty,
                                    alpha=float(cfg.alpha), prefix=tuple(self.prefix), max_len=int(limits[b]),
                                    stop_reason=stop_reasons[b]))
        return traces

    def _forced_arrays(self) -> np.ndarray:
        """[B, P] candidate rows of the forced prefix."""
        n = len(self.prefix)
        rows = np.zeros((self.batch, n), dtype=CANDIDATE_DTYPE)
        if n:
            lp = _np(self.forced_lp).astype(np.float64)                       # [B, P]
            rows["step"], rows["token"], rows["status"] = np.arange(n), self.prefix, FORCED
            rows["token_logprob"], rows["score"] = lp, lp.cumsum(axis=1)
            divisor = np.asarray(length_penalty(np.arange(1.0, n + 1), self.cfg.length_penalty, self.cfg.alpha))
            rows["normalized"] = rows["score"] / divisor
        return rows

    def _alternative_arrays(self, steps_abs: np.ndarray) -> dict[str, np.ndarray]:
        batch, k = self.batch, self.k
        values = _np(torch.stack([s["alt"][0] for s in self.steps])).reshape(len(self.steps), batch, k, -1)
        indices = _np(torch.stack([s["alt"][1] for s in self.steps])).reshape(values.shape)   # [T, B, K, k]
        prev = _np(torch.stack([s["prev_scores"] for s in self.steps]))       # [T, B, K]
        out = dict(values=values, indices=indices, scores=prev[..., None] + values, steps=steps_abs)
        if self.forced_alt is not None:
            out["forced_values"], out["forced_indices"] = _np(self.forced_alt.values), _np(self.forced_alt.indices)
            before = np.concatenate([np.zeros((batch, 1)), _np(self.forced_lp).cumsum(axis=1)[:, :-1]], axis=1)
            out["forced_scores"] = before[:, :, None] + out["forced_values"]   # [B, P, k]
        return out

    def _alternatives_of(self, alts: dict | None, b: int, live: np.ndarray) -> np.ndarray:
        if alts is None:
            return np.zeros(0, dtype=ALTERNATIVE_DTYPE)
        parts = []
        if "forced_values" in alts:
            part = np.zeros(alts["forced_values"].shape[1:], dtype=ALTERNATIVE_DTYPE)   # [P, k]
            part["step"] = np.arange(part.shape[0])[:, None]
            part["rank"] = np.arange(part.shape[1])[None, :]
            part["token"], part["token_logprob"] = alts["forced_indices"][b], alts["forced_values"][b]
            part["score"] = alts["forced_scores"][b]
            parts.append(part.reshape(-1))
        scores = alts["scores"][live, b]                                      # [T_b, K, k]
        part = np.zeros(scores.shape, dtype=ALTERNATIVE_DTYPE)
        part["step"] = alts["steps"][live][:, None, None]
        part["parent"] = np.arange(self.k)[None, :, None]
        part["rank"] = np.arange(scores.shape[2])[None, None, :]
        part["token"], part["token_logprob"] = alts["indices"][live, b], alts["values"][live, b]
        part["score"] = scores
        parts.append(part[np.isfinite(scores[:, :, 0])].reshape(-1))          # only slots holding a hypothesis
        return np.concatenate(parts)


def _np(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()
