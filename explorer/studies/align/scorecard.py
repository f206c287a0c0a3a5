"""The alignment scorecard: every aligner scored against one gold set, as one JSON-ready dict.

Rows (explorer.studies.align.metrics: precision, recall, AER; "target" extraction, "mutual" beside it):
cross-attention per head / per layer mean / mean of all, naive and Shift-Att, raw and value-norm
weighted (explorer.studies.align.attention); gradient x input and integrated gradients (attribution.py);
eflomal trained on the checkpoint's training corpus + the gold pairs, symmetrised (statistical.py).
"Best head" and "best layer" are chosen on the gold set itself (an oracle choice, as when a paper
reports its best layer): they say what the model holds, not what an aligner picked blind would get.

Cancellable like the head lab (explorer.runtime.progress); `settings` is the cache key.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from explorer.studies.align.attention import METHODS, OFFSETS, attention_matrices
from explorer.studies.align.attribution import ATTRIBUTIONS, IG_STEPS, piece_attributions
from explorer.studies.align.gold import MAX_PAIRS, GoldPair, Link
from explorer.studies.align.metrics import EXTRACTIONS, AlignmentScore, extract_links, score_links
from explorer.studies.align.pairs import model_pairs
from explorer.studies.align.statistical import available as eflomal_available, eflomal_links
from explorer.inspection.attention_stats import word_matrix
from explorer.runtime.clock import StageClock
from explorer.runtime.progress import Cancelled, Ticker
from explorer.evaluation.arguments import check_ranges
from explorer.studies.common.context import RunContext

STAGES = ("attention", "grad-x-input", "integrated-gradients", "eflomal")
# The band the issue asks for when eflomal cannot run: German-English AER (%) as reported in the
# awesome-align README (Dou & Neubig 2021, "Word Alignment by Fine-tuning Embeddings on Parallel Corpora").
PUBLISHED_DE_EN = {"fast_align": 27.0, "eflomal": 22.6, "GIZA++": 20.6, "awesome-align": 15.1}
# What a run may ask for, checked by AlignSettings and by `python -m explorer align` as it parses its
# arguments: no more pairs than a gold file may hold (the app offers up to the gold set's size);
# integrated-gradients steps up to twice the app's cap of 64 for one sentence (Sundararajan et al.
# found 20 to 300 enough; each step is a forward shared by the targets and a backward pass per target
# piece, ~5 s of CPU a Bible verse on bible-es-en at the default 32).
RANGES = {"pairs": (1, MAX_PAIRS), "attribution_pairs": (0, MAX_PAIRS), "ig_steps": (2, 128)}


@dataclass(frozen=True)
class AlignSettings:
    pairs: int = 200                  # the first N gold pairs
    attribution_pairs: int = 60       # gradient methods on the first N usable ones (0: skip them);
    # integrated gradients costs ig_steps backward passes per target piece (~5 s of CPU a Bible verse)
    ig_steps: int = IG_STEPS
    eflomal: bool = True

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)


class Tally:
    """Predicted links per aligner key and extraction rule, over the pairs seen so far."""

    def __init__(self, gold: Sequence[GoldPair]):
        self.gold = list(gold)
        self.links: dict[tuple, list[set[Link]]] = {}

    def add(self, key: tuple, pair_index: int, matrix: np.ndarray, absolute: bool = False) -> None:
        self.add_extracted(key, pair_index, extracted(matrix, absolute))

    def add_extracted(self, key: tuple, pair_index: int, links: dict[str, set[Link]]) -> None:
        """One pair's links per extraction rule (extracted()), e.g. computed by another process."""
        for rule, found in links.items():
            self.links.setdefault((key, rule), [set() for _ in self.gold])[pair_index] = found

    def add_links(self, key: tuple, links: Sequence[set[Link]]) -> None:
        self.links[(key, "target")] = list(links)

    def score(self, key: tuple, rule: str = "target", upto: int | None = None) -> AlignmentScore:
        n = len(self.gold) if upto is None else upto
        return score_links(self.gold[:n], self.links[(key, rule)][:n])


def extracted(matrix: np.ndarray, absolute: bool = False) -> dict[str, set[Link]]:
    """A word matrix's links under every extraction rule (by size when `absolute`: attributions)."""
    m = np.abs(matrix) if absolute else matrix
    return {rule: extract_links(m, rule) for rule in EXTRACTIONS}


def _row(name: str, key: tuple, tally: Tally, upto: int | None = None) -> dict:
    method, offset, layer, head = (tuple(key) + (None, None, None, None))[:4]
    row = {"aligner": name, "method": method, "variant": offset,
           "layer": None if layer is None else layer + 1, "head": None if head is None else head + 1,
           "pairs": len(tally.gold) if upto is None else upto, **tally.score(key, "target", upto).as_dict()}
    if (key, "mutual") in tally.links:
        row["aer_mutual"] = tally.score(key, "mutual", upto).aer
    return row


def run_scorecard(model, tokenizer, gold: Sequence[GoldPair], settings: AlignSettings, *,
                  context: RunContext = RunContext(), gold_name: str = "", held_out: int | None = None,
                  train_pairs: Callable[[], tuple[Sequence, str]] | None = None,
                  attribution_path: str = "batched") -> dict:
    """Every row of the scorecard (see the module docstring); raises Cancelled. With the context's split
    (explorer.runtime.split: the processes torchrun started), each process aligns its share of the
    pairs and all gather every pair's links; the main one alone reports, runs eflomal and writes.
    `attribution_path`: attribution.PATHS ("captum": the reference path, for tests and benchmarks)."""
    split, t0 = context.split, time.time()
    ticker, clock = context.ticker(), StageClock()
    usable, skipped = model_pairs(model, tokenizer, list(gold)[:settings.pairs])
    if not usable:
        raise ValueError("no gold pair can be read by this model word for word (see explorer.studies.align.pairs)")
    tally = Tally([mp.gold for mp in usable])
    n_layers, n_heads = model.cfg.n_decoder_layers, model.cfg.n_heads

    def stage(name: str, total: int) -> Callable[[int], None]:
        tick = ticker.stage(name, total)

        def check(done: int) -> None:
            if not tick(done):
                raise Cancelled()
        return check

    def attention_links(mp) -> list[tuple[tuple, dict]]:
        return [(key, extracted(matrix)) for key, matrix in attention_matrices(model, mp)]

    for i, found in enumerate(split.map(usable, attention_links, stage("attention", len(usable)))):
        for key, links in found:
            tally.add_extracted(key, i, links)
    clock.lap("attention")

    n_attr = min(settings.attribution_pairs, len(usable))
    deltas: list[float] = []
    for method in ATTRIBUTIONS if n_attr else ():
        def attribution_links(mp, method=method) -> tuple[dict, list]:
            if method == "integrated-gradients":
                pieces, delta = piece_attributions(model, mp, method, settings.ig_steps, with_delta=True,
                                                   path=attribution_path)
                change = pieces.sum(axis=1) - delta                           # F(x) - F(baseline) per target
                gaps = [(abs(d), abs(c)) for d, c in zip(delta, change)]
            else:
                pieces, gaps = piece_attributions(model, mp, method, path=attribution_path), []
            return extracted(word_matrix(pieces, mp.tgt_groups, mp.src_groups), absolute=True), gaps

        for i, (links, gaps) in enumerate(split.map(usable[:n_attr], attribution_links, stage(method, n_attr))):
            tally.add_extracted((method,), i, links)
            deltas += gaps
        clock.lap(method)

    statistical = _eflomal(tally, settings, train_pairs, ticker, context.say) if split.is_main else {"skipped": "main only"}
    clock.lap("eflomal")
    grid = {m: {o: [[tally.score((m, o, l, h)).aer for h in range(n_heads)] for l in range(n_layers)]
                for o in OFFSETS} for m in METHODS}
    layers = {m: {o: [tally.score((m, o, l, None)).aer for l in range(n_layers)] for o in OFFSETS} for m in METHODS}
    rows = []
    for m in METHODS:
        for o in OFFSETS:
            label = f"{'cross-attention' if m == 'attention' else 'value-norm attention'} ({o})"
            head = min(((l, h) for l in range(n_layers) for h in range(n_heads)), key=lambda lh: grid[m][o][lh[0]][lh[1]])
            layer = int(np.argmin(layers[m][o]))
            rows += [_row(f"{label}: best head", (m, o) + head, tally),
                     _row(f"{label}: best layer mean", (m, o, layer, None), tally),
                     _row(f"{label}: mean of all heads", (m, o, None, None), tally)]
    for method in ATTRIBUTIONS if n_attr else ():
        row = _row(method, (method,), tally, n_attr)
        # the same pairs scored by the best attention layer, so the comparison is like for like
        same = min((tally.score(("attention", o, l, None), "target", n_attr).aer, o, l)
                   for o in OFFSETS for l in range(n_layers))
        row["attention_same_pairs"] = {"aer": same[0], "variant": same[1], "layer": same[2] + 1}
        rows.append(row)
    rows += [_row(f"eflomal ({direction})", ("eflomal", direction), tally)
             for direction in statistical.get("directions", ())]
    return {
        "settings": {**context.checkpoint(), "gold": gold_name, **asdict(settings)},
        "gold": {"name": gold_name, "pairs": len(usable), "skipped": skipped, "held_out": held_out,
                 "sure": sum(len(p.sure) for p in tally.gold),
                 "possible": sum(len(p.possible - p.sure) for p in tally.gold)},
        "rows": rows, "grid": grid, "layers": layers,
        "eflomal": {k: v for k, v in statistical.items() if k != "directions"},
        "published_de_en": PUBLISHED_DE_EN,
        "integrated_gradients": {"pairs": n_attr, "steps": settings.ig_steps, **_spread(deltas)},
        "seconds": round(time.time() - t0, 1),
        "stage_seconds": clock.seconds,
        "processes": split.world,
    }


def _eflomal(tally: Tally, settings: AlignSettings, train_pairs, ticker: Ticker, log) -> dict:
    if not settings.eflomal:
        return {"skipped": "not asked for"}
    reason = eflomal_available()
    if reason:
        log(f"eflomal: {reason}")
        return {"error": reason}
    tick = ticker.stage("eflomal", 1)
    corpus, corpus_name = train_pairs() if train_pairs else ((), "the gold pairs only")
    t = time.time()
    links = eflomal_links(tally.gold, corpus)
    for direction, found in links.items():
        tally.add_links(("eflomal", direction), found)
    ticker.check(tick, 1)
    return {"corpus": corpus_name, "training_pairs": len(corpus), "seconds": round(time.time() - t, 1),
            "directions": list(links)}


def _spread(gaps: Iterable[tuple[float, float]]) -> dict:
    """Completeness of integrated gradients: |sum of attributions - (F(x) - F(0))| per target, in nats
    and relative to |F(x) - F(0)| (relative only where that change is at least 0.5 nats: a target whose
    log-prob hardly moves from the baseline makes any gap look huge relative to it)."""
    pairs = [(g, c) for g, c in gaps if math.isfinite(g) and math.isfinite(c)]
    if not pairs:
        return {}
    absolute = np.array([g for g, _ in pairs])
    relative = np.array([g / c for g, c in pairs if c >= 0.5])
    out = {"targets": len(pairs), "absolute_gap_median": float(np.median(absolute)),
           "absolute_gap_max": float(absolute.max())}
    if relative.size:
        out.update({"relative_targets": int(relative.size), "relative_delta_median": float(np.median(relative)),
                    "relative_delta_p95": float(np.percentile(relative, 95)), "relative_delta_max": float(relative.max())})
    return out
