"""Where a reference fell off the beam, and whether the search or the model is to blame.

Force-score the reference (teacher forcing: decoding.teacher.score_targets), run the beam search with
its BeamTrace, and follow the reference's prefix through the trace step by step: at step t its prefix
ref[:t+1] is one of the extensions of the live hypotheses, ranked by cumulative log-prob. It stays while
it is kept (among the k best non-EOS extensions) and ends well if its final EOS finishes within the k
best. The first step where it is not kept is where it fell off: its rank there (1 = the best extension
of that step) is the candidate row's when the trace ranked it (the 2k best), else counted exactly over
every extension of every live hypothesis (one teacher-forced pass over the live prefixes).

The verdict compares whole outputs under the model, with the search's own objective (the cumulative
log-prob divided by the configured length penalty, so with length_penalty "none" the log-prob itself):
* search error: the reference scores higher than the output, so a search that had kept it would have
  preferred it; the search lost it (Stahlberg & Byrne 2019, "On NMT Search Errors and Model Errors: Cat
  Got Your Tongue?", EMNLP);
* model error: the model prefers its output; no search would have returned the reference.

A search given its first tokens (a multilingual model's target-language tag, forced and scoring 0:
decoding.core.with_given) is followed from its first free token: the reference, written by the same
tokenizer, starts with the same tag, which then scores in it what it scores in the output.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import torch

from explorer.config import DecodeConfig
from explorer.decoding.beam import beam_search
from explorer.decoding.beam_trace import FINISHED, FORCED, KEPT, PRUNED, TRUNCATED, BeamTrace
from explorer.decoding.core import Hypothesis, as_batch, constrain, decoding_session, normalize, special_ids
from explorer.decoding.teacher import score_targets

SEARCH_ERROR, MODEL_ERROR, NO_ERROR = "search error", "model error", "no error"
TOLERANCE = 1e-4                     # nats: scores closer than this are equal (batched vs teacher-forced sums)


@dataclass(frozen=True)
class ReferenceFall:
    """The reference's path through one beam search (module docstring)."""

    reference: list[int]             # output ids, EOS included
    output: list[int]                # the search's best, EOS included when finished
    reference_score: float           # cumulative log-prob under the model
    reference_normalized: float      # divided by the length penalty: the search's objective
    output_score: float
    output_normalized: float
    beam_size: int
    fate: str                        # output | finished | pruned | not ranked | stopped | too long
    step: int | None                 # 0-based output position where it left the beam (None: it never did)
    rank: int | None                 # 1-based rank of its prefix among that step's extensions
    prefix_score: float | None       # the prefix's cumulative log-prob at that step
    best_score: float | None         # the step's best extension's cumulative log-prob
    last_kept_score: float | None    # the lowest kept extension's: the score it had to beat
    verdict: str                     # SEARCH_ERROR | MODEL_ERROR | NO_ERROR

    def text(self, piece=str) -> str:
        """The verdict in words (`piece(id)` names a token)."""
        ref, out = f"{self.reference_normalized:.3f}", f"{self.output_normalized:.3f}"
        if self.verdict == NO_ERROR:
            return f"the output is the reference (score {out})"
        where = {"finished": "the reference finished in the beam but a better-scoring output won",
                 "stopped": "the search stopped with the reference's prefix still in the beam",
                 "too long": "the reference is longer than the search's length limit"}.get(self.fate)
        if where is None:
            at = self.reference[self.step] if self.step is not None else None
            where = (f"the reference left the beam at step {self.step + 1} (token {piece(at)!r}), ranked "
                     f"{self.rank} of the step's extensions with a beam of {self.beam_size} "
                     f"(its prefix {self.prefix_score:.3f} vs the best {self.best_score:.3f}, the last kept "
                     f"{self.last_kept_score:.3f})")
        blame = ("the model scores the reference higher than its output, so the search lost it"
                 if self.verdict == SEARCH_ERROR else "the model prefers its output")
        return f"{self.verdict}: {where}; reference {ref} vs output {out}: {blame}"


def reference_fall(model, src_ids: Sequence[int], reference: Sequence[int], cfg: DecodeConfig | None = None,
                   trace: BeamTrace | None = None, output=None, *, given: Sequence[int] = ()) -> ReferenceFall:
    """Follow `reference` (output ids; EOS appended when missing) through the beam search of `src_ids`
    under `cfg` (its beam size and length penalty). `trace` and `output` (a decoding.core.Hypothesis):
    a search already made with this cfg (trace=True), so the page does not search again. `given`: the
    tokens every output starts with (translate.forced_target), for the search made here; a search
    passed in says its own (trace.prefix), and the reference must start with them."""
    cfg = cfg or DecodeConfig()
    if cfg.strategy != "beam":
        cfg = DecodeConfig(**{**cfg.to_dict(), "strategy": "beam"})
    if trace is None or output is None:
        decoded = beam_search(model, [list(src_ids)], cfg, trace=True, given=given)[0]
        trace, output = decoded.trace, decoded.best
    forced = [int(t) for t in trace.prefix]
    if [int(t) for t in reference[:len(forced)]] != forced:
        raise ValueError("the reference is followed from the first output token the search chose: search without "
                         "a forced prefix (a multilingual model's target tag is fine: the reference starts with it)")
    ref = _forced_alike(score_targets(model, [list(src_ids)], [list(reference)], cfg)[0], output, len(forced), cfg)
    verdict = _verdict(ref, output)
    found = dict(fate="finished", step=None, rank=None, prefix_score=None, best_score=None, last_kept_score=None)
    if list(ref.ids) == list(output.ids):
        found["fate"] = "output"
    else:
        found.update(_follow(model, src_ids, trace, ref.ids, ref.token_logprobs, cfg))
    return ReferenceFall(reference=list(ref.ids), output=list(output.ids), reference_score=ref.score,
                         reference_normalized=ref.normalized, output_score=output.score,
                         output_normalized=output.normalized, beam_size=trace.beam_size, verdict=verdict, **found)


def _forced_alike(ref: Hypothesis, output: Hypothesis, n: int, cfg: DecodeConfig) -> Hypothesis:
    """The reference with its first `n` tokens scored as the search scored them (the same tokens after the
    same context: a given tag's 0, a prefix's own log-prob), so the two compare on one objective."""
    if not n:
        return ref
    lps = list(output.token_logprobs[:n]) + list(ref.token_logprobs[n:])
    score = float(sum(lps))
    return replace(ref, token_logprobs=lps, score=score, normalized=normalize(score, len(ref.ids), cfg))


def _verdict(ref, output) -> str:
    if list(ref.ids) == list(output.ids):
        return NO_ERROR
    return SEARCH_ERROR if ref.normalized > output.normalized + TOLERANCE else MODEL_ERROR


def _follow(model, src_ids, trace: BeamTrace, ref: list[int], ref_lp: list[float], cfg: DecodeConfig) -> dict:
    """The step, rank and scores where `ref` left the trace's beam (ReferenceFall's fields)."""
    cand = trace.candidates
    slot, cumulative = 0, np.cumsum(ref_lp)
    for t, token in enumerate(ref):
        rows = trace.step_rows(t)
        if len(rows) == 0:                                                    # the search ended before step t
            fate = "too long" if t >= trace.max_len else "stopped"
            return dict(fate=fate, step=None, rank=None, prefix_score=None, best_score=None, last_kept_score=None)
        ours = rows[(cand["parent"][rows] == slot) & (cand["token"][rows] == token)]
        status = int(cand["status"][ours[0]]) if len(ours) else PRUNED
        if status in (KEPT, FORCED):
            slot = int(cand["slot"][ours[0]])
            continue
        if status == FINISHED:
            return dict(fate="finished", step=None, rank=None, prefix_score=None, best_score=None, last_kept_score=None)
        if status == TRUNCATED:
            return dict(fate="too long", step=None, rank=None, prefix_score=None, best_score=None, last_kept_score=None)
        kept = rows[np.isin(cand["status"][rows], (KEPT, TRUNCATED))]
        scores = cand["score"][rows]
        if len(ours):
            rank, fate = int(cand["rank"][ours[0]]) + 1, "pruned"
        else:
            rank, fate = _exact_rank(model, src_ids, trace, t, slot, token, cfg), "not ranked"
        return dict(fate=fate, step=t, rank=rank, prefix_score=float(cumulative[t]), best_score=float(scores.max()),
                    last_kept_score=float(cand["score"][kept].min()) if len(kept) else None)
    return dict(fate="finished", step=None, rank=None, prefix_score=None, best_score=None, last_kept_score=None)


def _exact_rank(model, src_ids, trace: BeamTrace, t: int, slot: int, token: int, cfg: DecodeConfig) -> int:
    """1 + how many extensions of the live hypotheses before step t score above the reference's prefix
    (which extends the hypothesis in `slot` by `token`): one teacher-forced pass over the live prefixes."""
    cand = trace.candidates
    if t == 0:
        live, prefixes, before = [0], [[]], np.zeros(1)
    else:
        rows = trace.step_rows(t - 1)
        rows = rows[np.isin(cand["status"][rows], (KEPT, FORCED))]
        live = [int(cand["slot"][r]) for r in rows]
        prefixes = [trace.tokens(int(r)) for r in rows]
        before = cand["score"][rows].astype(np.float64)                      # [L]
    special = special_ids(model)
    with decoding_session(model):
        src, _ = as_batch([list(src_ids)], model)                            # [1, S]
        tgt_in = torch.tensor([[special.start] + p for p in prefixes], device=src.device)   # [L, t+1]
        log_probs = model(src.expand(len(prefixes), -1), tgt_in)[:, -1]      # [L, V]
        log_probs = constrain(log_probs.clone(), t, cfg.min_len, special).double().cpu().numpy()
    totals = before[:, None] + log_probs                                     # [L, V]
    mine = totals[live.index(slot), token]
    return 1 + int((totals > mine).sum())
