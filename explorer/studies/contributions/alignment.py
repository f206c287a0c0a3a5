"""ALTI+'s cross-attention contributions as a word aligner, scored against gold beside raw attention.

Each decoder layer's cross-attention block gives, per output token, a contribution over the source
tokens (and its own residual, dropped here, the row renormalised): an aligner of its own, as in
Ferrando et al. (EMNLP 2022), who report its AER beside attention's. Both are taken from the same
teacher-forced pass (explorer.studies.contributions.sentence), turned into word matrices and links exactly as
the alignment scorecard does (explorer.studies.align: word_matrix, extraction by the target's argmax, Och & Ney's
AER at corpus level), naive and Shift-Att rows (explorer.studies.align.attention.OFFSETS); the full rollout's
source part is scored too.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from explorer.studies.align.attention import OFFSETS
from explorer.studies.align.gold import GoldPair
from explorer.studies.align.metrics import EXTRACTIONS, extract_links, score_links
from explorer.studies.align.pairs import model_pairs
from explorer.studies.contributions.sentence import sentence_contributions
from explorer.inspection.attention_stats import word_matrix
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study

ALIGNERS = ("attention", "alti")         # raw cross-attention (heads averaged), ALTI+ cross contributions


def _matrices(sc, n_src: int) -> dict[tuple, np.ndarray]:
    """(aligner, layer or "rollout") -> piece matrix [T, S] of one pair."""
    found = {}
    for layer in range(sc.cross.shape[0]):
        found[("attention", layer)] = sc.cross_attention[layer]
        found[("alti", layer)] = sc.cross_source[layer]
    found[("alti", "rollout")] = sc.rollout[-1][:, :n_src]
    return found


def run_alignment(model, tokenizer, gold: Sequence[GoldPair], pairs: int, *, gold_name: str = "",
                  context: RunContext = RunContext()) -> dict:
    """AER per layer of both aligners, both row offsets, both extraction rules. Raises Cancelled."""
    t0 = time.time()
    usable, skipped = model_pairs(model, tokenizer, list(gold)[:pairs])
    if not usable:
        raise ValueError("no gold pair can be read by this model word for word (see explorer.studies.align.pairs)")
    links: dict[tuple, list] = {}
    ticker = context.ticker()
    tick = ticker.stage("alignment", len(usable))
    for i, mp in enumerate(usable):
        sc = sentence_contributions(model, mp.src_ids, mp.out_ids)
        for key, m in _matrices(sc, len(mp.src_ids)).items():
            for offset, shift in OFFSETS.items():
                rows = [[k + shift for k in g] for g in mp.tgt_groups]
                words = word_matrix(m, rows, mp.src_groups)                  # [Tw, Sw]
                for rule in EXTRACTIONS:
                    links.setdefault(key + (offset, rule), []).append(extract_links(words, rule))
        ticker.check(tick, i + 1)
    golds = [mp.gold for mp in usable]
    table = []
    for (aligner, layer, offset, rule), found in links.items():
        score = score_links(golds, found)
        table.append({"aligner": aligner, "layer": layer if layer == "rollout" else layer + 1, "variant": offset,
                      "rule": rule, "aer": score.aer, "precision": score.precision, "recall": score.recall})
    context.say(f"{len(usable)} gold pairs in {time.time() - t0:.1f} s")
    return {"settings": {**context.checkpoint(), "check": "alignment", "gold": gold_name, "pairs": pairs},
            "gold": {"name": gold_name, "pairs": len(usable), "skipped": skipped},
            "rows": table, "seconds": round(time.time() - t0, 1)}


def report(result: dict) -> str:
    """AER (%) per layer: raw attention and ALTI+ side by side, naive and Shift-Att rows, target argmax."""
    rows = [r for r in result["rows"] if r["rule"] == "target"]
    aer = {(r["aligner"], r["layer"], r["variant"]): r["aer"] for r in rows}
    layers = sorted({r["layer"] for r in rows if r["layer"] != "rollout"})
    lines = [f"AER (%) on {result['gold']['name']} ({result['gold']['pairs']} pairs), argmax per target word",
             f"{'layer':<10}" + "".join(f"{a + ' ' + o:>20}" for a in ALIGNERS for o in OFFSETS)]
    for layer in layers:
        lines.append(f"{layer:<10}" + "".join(f"{100 * aer[(a, layer, o)]:>20.1f}" for a in ALIGNERS for o in OFFSETS))
    lines.append(f"{'rollout':<10}" + " " * 40 + "".join(f"{100 * aer[('alti', 'rollout', o)]:>20.1f}" for o in OFFSETS))
    return "\n".join(lines)


ALIGNMENT = Study("contributions", run_alignment, ("settings", "gold", "rows"), report, ("alignment",))
