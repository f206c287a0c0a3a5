"""The head lab as one job: statistics, roles, importance, single-head removal and pruning curves
over a checkpoint's test sentences, written as one JSON file.

Reproduces, on the model at hand and over a test set, Voita et al. 2019 (ACL: head confidence and
roles) and Michel et al. 2019 (NeurIPS: gradient importance, single-head removal, pruning curves);
see explorer.studies.heads.stats, roles, importance and pruning. The job reports progress through a
callback and can be cancelled (the callback returns False, or a threading.Event is set); the file
is written once at the end with write_json_atomic, so a cancelled or killed job leaves no file, or
the previous one whole. `settings` (weights sha, sentences, forced, seeds, points) is the cache key.
"""
from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np

from explorer.studies.heads.importance import SINGLE_REMOVALS, HeadRemover, all_heads, gradient_importance, \
    normalize_per_layer, single_head_removal
from explorer.studies.heads.pruning import SCOPES, plan_curves, removable, score_curves
from explorer.studies.heads.roles import label_heads
from explorer.studies.common.sentences import FORCED, GREEDY, build_sentences, token_counts
from explorer.studies.heads.stats import HEAD_STATS, head_statistics
from explorer.inspection.trace import ATTENTION_KINDS, KINDS
from explorer.runtime.clock import StageClock
from explorer.evaluation.arguments import check_ranges
from explorer.evaluation.scores import MAX_HELD_OUT
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.heads.report import report
from explorer.data.splits import DEFAULT_SEED, default_data_dir, load_cached

STAGES = ("statistics", "importance", "single-head removal", "pruning")
# What a run may ask for, checked by LabSettings and by `python -m explorer heads` as it parses its
# arguments. The app's widgets stop at 500 sentences and 10 seeds; the command line goes to a whole
# shipped test set (MAX_HELD_OUT). Far enough out for any real use, near enough that a slip (a
# few extra zeros) is refused at once: plan_curves builds seeds x curves before anything is scored,
# and a billion seeds filled 3 GB with nothing computed. A curve saturates at one point per head, so
# more points than 32 only multiply greedy decodes of the set.
RANGES = {"sentences": (1, MAX_HELD_OUT), "seeds": (0, 10), "points": (1, 32), "batch_size": (1, 256)}


@dataclass(frozen=True)
class LabSettings:
    sentences: int = 200             # the first N held-out pairs
    forced: str = "reference"        # teacher-force the reference or the model's own greedy output
    seeds: int = 3                   # random removal orders (the pruning baseline)
    points: int = 3                  # scored points per kind's pruning curve after the first (all kinds: 2x)
    batch_size: int = 16
    single_removal: str = "bleu"     # SINGLE_REMOVALS: "bleu" decodes each removal (exact), "loss" approximates

    def __post_init__(self) -> None:
        if self.forced not in FORCED:
            raise ValueError(f"forced must be one of {FORCED}, not {self.forced!r}")
        if self.single_removal not in SINGLE_REMOVALS:
            raise ValueError(f"single_removal must be one of {tuple(SINGLE_REMOVALS)}, not {self.single_removal!r}")
        check_ranges(self, RANGES)

    def key(self) -> dict:
        """The settings as the app's result file names them: every field, the exact default scoring
        left out, so results computed before the option existed keep their names."""
        fields = asdict(self)
        if fields["single_removal"] == "bleu":
            del fields["single_removal"]
        return fields

    def curve_points(self) -> dict[str, int]:
        return {scope: self.points * (2 if scope == "all" else 1) for scope in SCOPES}


@dataclass(frozen=True)
class Cost:
    """What a run costs, counted before it starts (each decode is one greedy pass over the set)."""
    sentences: int
    heads: int
    forward_passes: int              # teacher-forced batches: statistics + loss per removed head
    backward_passes: int             # gradient batches for importance
    decodes: int                     # greedy decodes of the whole set: baseline + single heads + curve points

    def text(self) -> str:
        return (f"{self.heads} heads x {self.sentences} sentences: {self.forward_passes} teacher-forced batch passes, "
                f"{self.backward_passes} backward batch passes, {self.decodes} greedy decodes of the set")


def estimate_cost(model, settings: LabSettings, n_sentences: int) -> Cost:
    heads = len(all_heads(model))
    batches = math.ceil(n_sentences / settings.batch_size)
    loss_batches = math.ceil(n_sentences / 32)
    zeros = {kind: np.zeros((ATTENTION_KINDS[kind].n_layers(model.cfg), model.cfg.n_heads)) for kind in KINDS}
    curves = plan_curves(zeros, settings.seeds, settings.curve_points())
    points = {frozenset(c.heads[:n]) for c in curves for n in c.removed}
    singles = {frozenset([h]) for h in all_heads(model)} if settings.single_removal == "bleu" else set()
    own_output = 1 if settings.forced == "output" else 0                    # the forced output is decoded first
    return Cost(n_sentences, heads, batches + loss_batches * (heads + 1), batches,
                len(points | singles | {frozenset()}) + own_output)


def frequencies(tokenizer, meta: dict, pairs) -> tuple[dict[str, Counter], str]:
    """Token counts per side for Voita's rare-word test: the checkpoint's training data when its
    built corpus is cached (read only, never built here), else the held-out pairs themselves."""
    dataset = (meta.get("training") or {}).get("dataset")
    corpus = None
    if dataset in ("numbers", "bible"):
        corpus = load_cached(os.path.join(default_data_dir(), dataset), f"{dataset}-{DEFAULT_SEED}")
    if corpus is not None and corpus.train:
        source, what = corpus.train, f"training data ({dataset}, {len(corpus.train)} pairs)"
    else:
        source, what = list(pairs), f"the held-out pairs themselves ({len(pairs)}): training data not available"
    return {"src": token_counts(tokenizer, [p.src for p in source], "src"),
            "tgt": token_counts(tokenizer, [p.tgt for p in source], "tgt")}, what


def run_head_lab(model, tokenizer, pairs, settings: LabSettings, *, context: RunContext = RunContext(),
                 reuse: bool = True) -> dict:
    """Every head-lab result as plain JSON-ready data (see the module docstring). Raises Cancelled.
    With the context's split (explorer.runtime.split: the processes torchrun started), each process
    computes its share of every stage and all end with the same result; only the main one reports
    progress. reuse=False decodes every removal step by step (HeadRemover: the path before its checks)."""
    meta, split, log = context.meta, context.split, context.say
    t0 = time.time()
    ticker = context.ticker()
    clock = StageClock()
    sents = build_sentences(model, tokenizer, pairs, settings.sentences, settings.forced)
    cost = estimate_cost(model, settings, len(sents))
    log(f"cost: {cost.text()}" + (f"; {split.world} processes" if split.active else ""))
    counts, rare_source = frequencies(tokenizer, meta, pairs)
    clock.lap("sentences")
    stats = head_statistics(model, sents, counts, settings.batch_size, ticker.stage("statistics", len(sents)), split)
    clock.lap("statistics")
    raw = gradient_importance(model, sents, settings.batch_size, ticker.stage("importance", len(sents)), split)
    normalized = {kind: normalize_per_layer(v) for kind, v in raw.items()}
    clock.lap("importance")
    remover = HeadRemover(model, tokenizer, sents, stop=context.stopped, reuse=reuse)
    heads = all_heads(model)
    tick = ticker.stage("single-head removal", len(heads))
    t1 = time.time()
    full = remover.scores(())
    log(f"full model: BLEU {full['bleu']:.2f} chrF {full['chrf']:.2f}; one decode of the set took "
        f"{time.time() - t1:.1f} s, so about {(time.time() - t1) * cost.decodes / 60 / split.world:.1f} min "
        f"of decoding in all")
    removals = single_head_removal(model, remover, sents, tick, split, settings.single_removal)
    clock.lap("single-head removal")
    curves = plan_curves(normalized, settings.seeds, settings.curve_points())
    score_curves(curves, remover, ticker.stage("pruning", sum(len(c.removed) for c in curves)), split)
    clock.lap("pruning")
    return {
        "settings": settings_key(settings, context, len(sents)),
        "rare_frequencies": rare_source,
        "cost": asdict(cost),
        "seconds": round(time.time() - t0, 1),
        "stage_seconds": clock.seconds,
        "processes": split.world,
        "checks": {"sentences_checked": remover.checked, "decoded_again": remover.redecoded,
                   "encoder_batches_reused": remover.memo.reused if remover.memo is not None else 0},
        "single_removal": SINGLE_REMOVALS[settings.single_removal],
        "stats": [{"kind": kind, "layer": layer + 1, "head": head + 1,
                   **{name: _num(ks.mean[name][layer, head]) for name in HEAD_STATS},
                   **{f"{name}_std": _num(ks.std[name][layer, head]) for name in HEAD_STATS}}
                  for kind, ks in stats.items() for layer in range(ks.shape[0]) for head in range(ks.shape[1])],
        "roles": [{"kind": r.kind, "layer": r.layer + 1, "head": r.head + 1, "role": r.role, "rule": r.rule,
                   "value": _num(r.value), "others": [{"role": o, "rule": t, "value": _num(v)} for o, t, v in r.others]}
                  for r in label_heads(stats)],
        "importance": [{"kind": k, "layer": l + 1, "head": h + 1, "importance": _num(raw[k][l, h]),
                        "normalized": _num(normalized[k][l, h])} for k, l, h in heads],
        "single_head_removal": [{**asdict(r), "layer": r.layer + 1, "head": r.head + 1} for r in removals],
        "pruning": {"full": full, "decodes": remover.decodes,
                    "curves": [{"scope": c.scope, "order": c.order, "seed": c.seed, "removed": c.removed,
                                "fraction": c.fraction, "bleu": c.bleu, "chrf": c.chrf,
                                "heads": [{"kind": k, "layer": l + 1, "head": h + 1} for k, l, h in c.heads]}
                               for c in curves],
                    "removable_within_1_bleu": {c.scope: removable(c) for c in curves if c.order == "importance"}},
    }


def settings_key(settings: LabSettings, context: RunContext, n_sentences: int) -> dict:
    """What identifies a result: the weights, the sentences, the forcing, the seeds, the points."""
    return {**context.checkpoint(), "sentences": n_sentences, "forced": settings.forced, "seeds": settings.seeds,
            "points": settings.points, "single_removal": settings.single_removal,
            "decoding": {"strategy": "greedy", "max_len_a": GREEDY.max_len_a, "max_len_b": GREEDY.max_len_b}}


def removal_scoring(result: dict) -> str:
    """How a result scored its single-head removals, a key of SINGLE_REMOVALS, read from its settings
    (results from before the option existed were decoded: "bleu")."""
    return result.get("settings", {}).get("single_removal", "bleu")


def _num(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


RESULT_KEYS = ("settings", "stats", "roles", "importance", "single_head_removal", "pruning")
HEAD_LAB = Study("heads", run_head_lab, RESULT_KEYS, report, STAGES)
