"""Pruning curves: BLEU and chrF as more and more heads are removed (Michel et al. 2019, Fig. 3-4).

Michel, Levy and Neubig 2019 ("Are Sixteen Heads Really Better than One?", NeurIPS) remove heads
in order of increasing importance (their I_h, normalised per layer) and plot BLEU against the
fraction removed; a flat start says many heads are redundant. The baseline here is removal in
random order (a few seeds): importance order is only informative where it beats chance.

One curve per attention kind (removing only that kind's heads) and one over all heads together
(ranked by the layer-normalised scores, so kinds compare on the same scale). A curve is scored
every `step` heads to bound cost (each point is a greedy decode of the whole set); the first point
(nothing removed) is the full model's score on the same sentences and the last removes every head
of the curve, so points shared between curves and seeds are decoded once (HeadRemover's cache).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from explorer.studies.heads.importance import Head, HeadRemover
from explorer.inspection.trace import KINDS
from explorer.runtime.progress import Cancelled
from explorer.runtime.split import ONE, Split

SCOPES = KINDS + ("all",)


@dataclass(frozen=True)
class Curve:
    """Scores after removing the first n heads of `order`, for each n in `removed`."""

    scope: str                       # "encoder" | "decoder" | "cross" | "all"
    order: str                       # "importance" | "random"
    seed: int | None                 # the random order's seed (None for importance order)
    heads: list[Head]                # the removal order, 0-based
    removed: list[int]               # how many heads removed at each point (0 first)
    bleu: list[float] = field(default_factory=list)
    chrf: list[float] = field(default_factory=list)

    @property
    def fraction(self) -> list[float]:
        return [n / len(self.heads) for n in self.removed]


def importance_order(normalized: dict[str, np.ndarray], scope: str) -> list[Head]:
    """Heads of a scope, least important first (ties: kind, layer, head order)."""
    kinds = KINDS if scope == "all" else (scope,)
    heads = [(kind, layer, head) for kind in kinds for layer in range(normalized[kind].shape[0])
             for head in range(normalized[kind].shape[1])]
    return sorted(heads, key=lambda h: (float(normalized[h[0]][h[1], h[2]]), KINDS.index(h[0]), h[1], h[2]))


def random_order(heads: list[Head], seed: int) -> list[Head]:
    rng = np.random.default_rng(seed)
    return [heads[i] for i in rng.permutation(len(heads))]


def checkpoints(n_heads: int, step: int) -> list[int]:
    """0, step, 2*step, ..., n_heads (the last point always removes every head)."""
    return sorted(set(range(0, n_heads, max(1, step))) | {n_heads})


def auto_step(n_heads: int, points: int) -> int:
    """The step that scores about `points` points after the first."""
    return max(1, math.ceil(n_heads / max(1, points)))


def plan_curves(normalized: dict[str, np.ndarray], seeds: int, points: dict[str, int]) -> list[Curve]:
    """Every curve to score: per scope, importance order and `seeds` random orders (seeds 0..k-1)."""
    curves = []
    for scope in SCOPES:
        order = importance_order(normalized, scope)
        removed = checkpoints(len(order), auto_step(len(order), points[scope]))
        curves.append(Curve(scope, "importance", None, order, removed))
        for seed in range(seeds):
            curves.append(Curve(scope, "random", seed, random_order(order, seed), removed))
    return curves


def score_curves(curves: list[Curve], remover: HeadRemover, tick: Callable[[int], bool] | None = None,
                 split: Split = ONE) -> list[Curve]:
    """Fill each curve's bleu/chrf (in place; returned for chaining). tick(points done) may cancel.
    The distinct sets not scored yet are decoded first, in curve order (with a `split`, each process
    takes its share and every process caches every score); then the curves read the cache."""
    total = sum(len(c.removed) for c in curves)
    fresh = list(dict.fromkeys(frozenset(c.heads[:n]) for c in curves for n in c.removed
                               if frozenset(c.heads[:n]) not in remover.cache))

    def progress(done: int) -> None:
        if tick is not None and tick(done) is False:
            raise Cancelled()

    for key, found in zip(fresh, split.map(fresh, remover.scores, progress)):
        remover.cache[key] = found
    for curve in curves:
        curve.bleu.clear()
        curve.chrf.clear()
        for n in curve.removed:
            found = remover.scores(curve.heads[:n])
            curve.bleu.append(found["bleu"])
            curve.chrf.append(found["chrf"])
    progress(total)
    return curves


def removable(curve: Curve, max_loss: float = 1.0) -> int:
    """How many heads the curve removes before BLEU first falls more than max_loss below its start
    (the largest scored point that keeps BLEU >= start - max_loss, with every earlier point too)."""
    best = 0
    for n, bleu in zip(curve.removed, curve.bleu):
        if bleu < curve.bleu[0] - max_loss:
            break
        best = n
    return best
