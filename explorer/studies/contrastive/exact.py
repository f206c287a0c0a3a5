"""Exact search: the output the model scores highest, found by depth-first branch-and-bound
(Stahlberg & Byrne 2019, "On NMT Search Errors and Model Errors: Cat Got Your Tongue?", EMNLP).

Why it can be exact. A hypothesis's score is a sum of log-probs, each <= 0, so adding a token never
raises it: a prefix that already scores no better than the best complete output found so far cannot
lead to a better one, and its whole subtree is cut. The bound starts at a beam search's output (passed
in as `initial`), so only what could beat the beam is searched. Children are tried best first, so a good
output is met early and the bound tightens fast; a child's test is one comparison on the parent's
log-probs, and only children that pass cost a decoder step.

The space is the beam search's own (decoding.core): tokens constrain() allows at each position (never
PAD or the start id, EOS not before min_len), outputs that end with EOS, and outputs cut at the length
limit a * src_len + b without EOS, which beam search also returns. The objective is the cumulative
log-prob divided by the config's length penalty; with "none" (the paper's setting) that is the log-prob
itself. With a penalty the bound still holds (the best a prefix of score s can reach is s / lp(limit):
s <= 0 and lp grows with length) but is looser, so the search takes longer.

Each node extension is one step of the cached step decoder (decoding.core.StepDecoder): a child's
decoder cache is its parent's plus one token. The cache's tensors are never written in place (each step
concatenates new ones), so a parent's cache is kept as the list of its tensors and given back after each
child: backtracking costs nothing. A node budget (decoder steps) and a time budget stop a search that
would run too long; the result then says proven False: the best found is returned, and no claim is made
that nothing better exists. Scores closer than TOLERANCE count as equal (float sums in another order).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from explorer.config import DecodeConfig
from explorer.decoding.core import (Hypothesis, as_batch, check_prefix, constrain, decoding_session, length_penalty,
                                    max_lengths, special_ids, start, with_given)

TOLERANCE = 1e-4                     # nats
MAX_NODES = 100_000                  # default node budget (decoder steps)
MAX_SECONDS = 60.0


@dataclass(frozen=True)
class ExactResult:
    """The best output found, and whether the search proved that nothing scores higher."""

    ids: list[int]                   # EOS included when finished
    score: float                     # cumulative log-prob
    normalized: float                # the objective: score / length penalty
    finished: bool                   # False: cut at the length limit
    proven: bool                     # the whole space was searched (within TOLERANCE)
    beat_initial: bool               # found an output scoring higher than `initial`
    nodes: int                       # decoder steps taken
    seconds: float
    stopped_by: str                  # "" when proven, else "nodes", "time" or "cancelled"
    eos_id: int

    @property
    def output_ids(self) -> list[int]:
        return self.ids[:-1] if self.finished else list(self.ids)


class _Budget(Exception):
    def __init__(self, why: str):
        self.why = why


def _snapshot(cache) -> tuple[int, list[dict]]:
    return cache.length, [{name: dict(part) for name, part in layer.items()} for layer in cache.layers]


def _restore(cache, snap: tuple[int, list[dict]]) -> None:
    cache.length = snap[0]
    cache.layers = [{name: dict(part) for name, part in layer.items()} for layer in snap[1]]


def exact_search(model, src_ids: Sequence[int], cfg: DecodeConfig | None = None, *,
                 initial: Hypothesis | None = None, max_nodes: int = MAX_NODES, max_seconds: float = MAX_SECONDS,
                 stop: Callable[[], bool] | None = None, given: Sequence[int] = ()) -> ExactResult:
    """The highest-scoring output of one source (module docstring). `initial`: a known output (a beam
    search's best) whose objective starts the bound; the result is never worse than it. `given`: the
    tokens every output starts with, scoring 0 (a multilingual model's target tag), as the beam search
    was given them: the space searched is the outputs that start with them."""
    cfg = cfg or DecodeConfig()
    special = special_ids(model)
    kind, alpha = cfg.length_penalty, cfg.alpha
    t0 = time.perf_counter()
    with decoding_session(model):
        src, src_len = as_batch([list(src_ids)], model)                      # [1, S]
        forced = check_prefix(with_given(given, None)[0], model)
        limit = int(max_lengths(src_len, cfg, model.cfg.max_len, len(forced))[0])
        at_limit = float(length_penalty(limit, kind, alpha))
        step, first = start(model, src, forced)                              # [1, P+1, V]
        best = {"ids": [], "score": float("-inf"), "norm": float("-inf"), "finished": False}
        if initial is not None:
            best.update(ids=list(initial.ids), score=float(initial.score), finished=bool(initial.finished),
                        norm=float(initial.score) / float(length_penalty(max(len(initial.ids), 1), kind, alpha)))
        initial_norm = best["norm"]
        nodes = [0]
        device = src.device

        def visit(prefix: list[int], score: float, log_probs: torch.Tensor) -> None:
            """Try every child of `prefix` that could beat the best, best child first. log_probs [V]."""
            t = len(prefix)                                                   # the position being filled
            row = constrain(log_probs.view(1, -1).clone(), t, cfg.min_len, special)[0].double()   # [V]
            totals = score + row                                              # [V]
            divisor = at_limit if t + 1 < limit else float(length_penalty(t + 1, kind, alpha))
            hopeful = torch.nonzero(totals / divisor > best["norm"] + TOLERANCE).flatten()       # [n]
            if hopeful.numel() == 0:
                return
            order = hopeful[torch.argsort(row[hopeful], descending=True)].tolist()
            snap = _snapshot(step.cache) if any(tok != special.eos for tok in order) and t + 1 < limit else None
            for token in order:
                total = float(totals[token])
                if token == special.eos or t + 1 >= limit:                    # a complete output
                    norm = total / float(length_penalty(t + 1, kind, alpha))
                    if norm > best["norm"] + TOLERANCE:
                        best.update(ids=prefix + [token], score=total, norm=norm, finished=token == special.eos)
                    continue
                if total / at_limit <= best["norm"] + TOLERANCE:              # the bound tightened meanwhile
                    continue
                if nodes[0] >= max_nodes:
                    raise _Budget("nodes")
                if time.perf_counter() - t0 > max_seconds:
                    raise _Budget("time")
                if stop is not None and stop():
                    raise _Budget("cancelled")
                nodes[0] += 1
                _restore(step.cache, snap)
                child = step.feed(torch.tensor([[token]], device=device))[0, -1]   # [V]
                visit(prefix + [token], total, child)

        stopped_by = ""
        try:
            visit(forced, 0.0, first[0, -1])
        except _Budget as budget:
            stopped_by = budget.why
    return ExactResult(ids=best["ids"], score=best["score"], normalized=best["norm"], finished=best["finished"],
                       proven=stopped_by == "", beat_initial=best["norm"] > initial_norm + TOLERANCE,
                       nodes=nodes[0], seconds=time.perf_counter() - t0, stopped_by=stopped_by, eos_id=special.eos)
