"""Activation patching as a command's job: one minimal pair, or a set of them with the grids averaged,
written as one JSON file (whole or not at all: explorer.studies.common.result). It has no settings
beyond its pairs: the decoding that finds where two translations part is fixed (pair.PAIR_DECODING).

In a set, a pair that cannot be patched (different piece counts, identical sources, translations that
do not differ) is skipped and listed with its reason; a set with no usable pair is an error.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from explorer.decoding.core import special_ids
from explorer.decoding.translate import pieces
from explorer.studies.common.context import RunContext
from explorer.studies.common.kept import layer_label
from explorer.studies.common.result import Study
from explorer.studies.patching.grids import GRIDS, PairGrids, average, pair_grids
from explorer.studies.patching.pair import PAIR_DECODING, make_pair
from explorer.data.files import read_tsv

RANGES = {"pairs": (1, 1000)}
PAIRS_FILE_BYTES = 4 * 1024 * 1024              # a --pairs TSV is read up to this size
RESULT_KEYS = ("settings", "grids", "pairs")


def row_labels(model, grid: str) -> list[str]:
    """What each row of a grid is: an encoder depth (embeddings first) or a layer (1-based)."""
    if grid in ("encoder_resid", "changed"):
        return [layer_label(k) for k in range(model.cfg.n_encoder_layers + 1)]
    n = model.cfg.n_encoder_layers if grid == "encoder_heads" else model.cfg.n_decoder_layers
    return [layer_label(k) for k in range(1, n + 1)]


def describe(model, tokenizer, result: PairGrids, clean: str, corrupt: str) -> dict:
    """One pair as JSON: texts, pieces, where they differ, the measured tokens, the logit differences."""
    pair, ld = result.pair, result.logit_difference
    eos = special_ids(model).eos
    return {"clean": clean, "corrupt": corrupt, "changed": pair.changed, "position": pair.position,
            "src_pieces": pieces(tokenizer, pair.clean_src, "src"),
            "corrupt_pieces": pieces(tokenizer, pair.corrupt_src, "src"),
            "prefix_pieces": pieces(tokenizer, pair.prefix, "tgt"),
            "clean_token": pieces(tokenizer, [pair.clean_token], "tgt")[0],
            "corrupt_token": pieces(tokenizer, [pair.corrupt_token], "tgt")[0],
            "clean_translation": tokenizer.decode([t for t in pair.clean_output if t != eos], side="tgt"),
            "corrupt_translation": tokenizer.decode([t for t in pair.corrupt_output if t != eos], side="tgt"),
            "logit_difference": {"clean": ld["clean"], "corrupt": ld["corrupt"],
                                 "normalised_by": ld["clean"] - ld["corrupt"]}}


def run_patching(model, tokenizer, texts: Sequence[tuple[str, str]], *, context: RunContext = RunContext()) -> dict:
    """The grids of each (clean, corrupt) pair, averaged; unusable pairs skipped with their reason."""
    low, high = RANGES["pairs"]
    if not low <= len(texts) <= high:
        raise ValueError(f"pairs >= {low} and <= {high} required, not {len(texts)}")
    t0 = time.time()
    ticker = context.ticker()
    tick = ticker.stage("pairs", len(texts))
    done, described, skipped = [], [], []
    for number, (clean, corrupt) in enumerate(texts, start=1):
        try:
            result = pair_grids(model, make_pair(model, tokenizer, clean, corrupt))
        except ValueError as err:
            if len(texts) == 1:
                raise
            skipped.append({"pair": number, "clean": clean, "corrupt": corrupt, "reason": str(err)})
        else:
            done.append(result)
            described.append(describe(model, tokenizer, result, clean, corrupt))
        ticker.check(tick, number)
    if not done:
        raise ValueError(f"none of the {len(texts)} pairs can be patched; the first: {skipped[0]['reason']}")
    context.say(f"{len(done)} pairs patched ({len(skipped)} skipped) in {time.time() - t0:.1f} s")
    means = average(done)
    differences = [d["logit_difference"]["normalised_by"] for d in described]
    return {
        "settings": {**context.checkpoint(), "pairs": len(done), "skipped": len(skipped), "decoding": PAIR_DECODING.to_dict(),
                     "metric": "logit difference of the first differing output token; denoise: share restored, "
                               "noise: share destroyed (0 none, 1 all)"},
        "logit_difference": {"mean_normalised_by": float(np.mean(differences))},
        "grids": {name: {"rows": row_labels(model, name), **means[name]} for name in GRIDS},
        "pairs": described,
        "skipped": skipped,
        "seconds": round(time.time() - t0, 1),
    }


def read_pairs(path: str) -> list[tuple[str, str]]:
    """clean<TAB>corrupt lines of a user's file (read as untrusted input, at most PAIRS_FILE_BYTES);
    DataError (a ValueError) naming the line otherwise."""
    pairs = [(p.src, p.tgt) for p in read_tsv(path, max_bytes=PAIRS_FILE_BYTES)]
    if len(pairs) > RANGES["pairs"][1]:
        raise ValueError(f"{path}: {len(pairs)} pairs, at most {RANGES['pairs'][1]} are patched in one run")
    return pairs


def report(result: dict) -> str:
    """What the command prints: the pairs, the restoration at the changed word per encoder depth, the
    cross-attention heads that restore most."""
    s = result["settings"]
    lines = [f"activation patching over {s['pairs']} pair(s) ({s['skipped']} skipped); mean logit difference "
             f"{result['logit_difference']['mean_normalised_by']:.2f}"]
    for d in result["pairs"][:3]:
        lines.append(f"  {d['clean']!r} -> {d['clean_translation']!r} | {d['corrupt']!r} -> "
                     f"{d['corrupt_translation']!r}: {d['clean_token']!r} vs {d['corrupt_token']!r}")
    changed = result["grids"]["changed"]
    lines.append("the changed word's positions patched (denoise = restored, noise = destroyed):")
    for label, den, noi in zip(changed["rows"], changed["denoise"]["mean"], changed["noise"]["mean"]):
        lines.append(f"  {label:12s} {den[0]:6.3f} {noi[0]:6.3f}")
    cross = np.array(result["grids"]["cross_heads"]["denoise"]["mean"])           # [L, H]
    order = np.argsort(-cross, axis=None)[:5]
    heads = ", ".join(f"layer {i // cross.shape[1] + 1} head {i % cross.shape[1] + 1}: {cross.flat[i]:.3f}" for i in order)
    lines.append(f"cross-attention heads that restore most (denoise): {heads}")
    return "\n".join(lines)


PATCHING = Study("patch", run_patching, RESULT_KEYS, report, ("pairs",))
