"""Does the source share notice a made-up translation? Held-out sources teacher-forced on (a) their own
reference and (b) another pair's reference, which owes nothing to the source; how well each sentence's
mean source share separates (a) from (b), as an AUROC, beside the model's own sequence log-probability.

The idea is ALTI+'s (Ferrando et al., EMNLP 2022, who show source contributions fall on hallucinated
outputs): a decoder writing text detached from its source has to lean on its own prefix. The other
reference is drawn by a seeded derangement (no pair keeps its own), so a run is reproducible.
AUROC = P(score of a real pair > score of a detached one) + P(tie) / 2 (Mann-Whitney U / (n_a n_b)):
0.5 is chance, 1 a perfect separation.
"""
from __future__ import annotations

import random
import time
from typing import Sequence

import numpy as np

from explorer.studies.contributions.sentence import sentence_contributions
from explorer.decoding.core import special_ids
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.text.encoding import output_ids, source_ids

SEED = 0
SCORES = ("mean_source_share", "sequence_logprob", "mean_token_logprob")


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(p > n) + P(p == n) / 2 over every (positive, negative) pair."""
    p = np.asarray(positive, dtype=np.float64)[:, None]                      # [P, 1]
    n = np.asarray(negative, dtype=np.float64)[None, :]                      # [1, N]
    if p.size == 0 or n.size == 0:
        raise ValueError("AUROC needs at least one score on each side")
    return float((p > n).mean() + 0.5 * (p == n).mean())


def derangement(n: int, seed: int = SEED) -> list[int]:
    """partner[i] != i for every i: a seeded shuffle, each index paired with the next one in it."""
    if n < 2:
        raise ValueError("the detached check needs at least 2 pairs")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    partner = [0] * n
    for k, i in enumerate(order):
        partner[i] = order[(k + 1) % n]
    return partner


def _scores(model, src: list[int], out: list[int]) -> dict:
    sc = sentence_contributions(model, src, out)
    lps = np.asarray(sc.token_logprobs)
    return {"mean_source_share": float(sc.source_share.mean()), "sequence_logprob": float(lps.sum()),
            "mean_token_logprob": float(lps.mean()), "tokens": len(out)}


def run_detached_check(model, tokenizer, pairs, sentences: int, *, seed: int = SEED,
                       context: RunContext = RunContext()) -> dict:
    """The check on the first `sentences` pairs (see the module docstring), JSON-ready. Raises Cancelled."""
    t0 = time.time()
    pairs = list(pairs)[:sentences]
    partner = derangement(len(pairs), seed)
    special, max_len = special_ids(model), model.cfg.max_len
    src = [source_ids(tokenizer, p.src, max_len, special) for p in pairs]
    ref = [output_ids(tokenizer, p.tgt, max_len, special) for p in pairs]
    ticker = context.ticker()
    tick = ticker.stage("detached check", len(pairs))
    rows = []
    for i in range(len(pairs)):
        rows.append({"index": i, "partner": partner[i], "own": _scores(model, src[i], ref[i]),
                     "detached": _scores(model, src[i], ref[partner[i]])})
        ticker.check(tick, i + 1)
    result = {name: {"auroc": auroc([r["own"][name] for r in rows], [r["detached"][name] for r in rows]),
                     "own_mean": float(np.mean([r["own"][name] for r in rows])),
                     "detached_mean": float(np.mean([r["detached"][name] for r in rows]))} for name in SCORES}
    context.say(f"{len(rows)} pairs x 2 in {time.time() - t0:.1f} s")
    return {"settings": {**context.checkpoint(), "check": "detached", "sentences": len(rows), "seed": seed},
            "scores": result, "pairs": rows, "seconds": round(time.time() - t0, 1)}


def report(result: dict) -> str:
    s = result["scores"]
    lines = [f"made-up translations: {result['settings']['sentences']} sources, each forced on its own reference "
             "and on another pair's", f"{'score':<22}{'AUROC':>8}{'own':>12}{'detached':>12}"]
    lines += [f"{name:<22}{s[name]['auroc']:>8.3f}{s[name]['own_mean']:>12.3f}{s[name]['detached_mean']:>12.3f}"
              for name in SCORES]
    return "\n".join(lines)


DETACHED = Study("contributions", run_detached_check, ("settings", "scores", "pairs"), report, ("detached check",))
