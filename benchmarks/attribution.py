"""Training-data attribution on a shipped checkpoint: what the gradient store costs, whether a training
pair used as the query finds itself, and what one word's attribution costs beside a translation.

    python -m benchmarks attribution [--checkpoint checkpoints/bible-es-en] [--queries 100]

Printed: the store's build time over the whole training split and its size (bytes on disk, the bound);
of --queries training pairs spread evenly over the split, each used as the query (its whole target's
gradient), how many rank themselves first; the time of one output word's attribution (its gradient and
the product with the store) beside a beam-5 translation of the same sentence, in the same process (a
ratio: these machines are noisy); the process's peak resident memory.
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from explorer.decoding.translate import DecodeConfig, translate
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.grounding import influence
from explorer.studies.common.training_data import dataset_of, training_pairs
from explorer.text.encoding import output_ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks attribution")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--queries", type=int, default=100, help="training pairs used as queries (default 100)")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = load_checkpoint(args.checkpoint)
    model, tok, special = ckpt.model, ckpt.tokenizer, ckpt.model.cfg.special
    pairs = training_pairs(ckpt.meta)
    started = time.perf_counter()
    store = influence.build(model, tok, pairs, dataset_of(ckpt.meta), ckpt.meta["weights_sha256"])
    built = time.perf_counter() - started
    print(f"store: {store.pairs:,} training pairs in {built:.0f} s; {store.features.nbytes / 1e6:.1f} MB "
          f"({store.pairs:,} x {store.features.shape[1]} float16; bound {influence.limits.GRADIENT_BYTES >> 20} MB)")

    picks = np.linspace(0, len(pairs) - 1, args.queries).round().astype(int)
    first, ties = 0, 0
    for i in picks:
        ids = output_ids(tok, pairs[i].tgt, model.cfg.max_len, special)
        best = influence.top(store, influence.query(model, tok, pairs[i].src, ids, range(len(ids))), 2)
        first += best[0].index == i
        ties += best[0].index != i and pairs[best[0].index][:2] == pairs[i][:2]
    print(f"self-rank: {first} of {len(picks)} training pairs rank themselves first "
          f"({ties} others are beaten only by an identical pair)")

    source = pairs[int(picks[len(picks) // 2])].src
    t0 = time.perf_counter()
    best = translate(model, tok, source, DecodeConfig(beam_size=5)).best
    t_translate = time.perf_counter() - t0
    word = next(w for w in best.text.split() if influence.word_positions(best.pieces, w))
    t0 = time.perf_counter()
    influence.top(store, influence.query(model, tok, source, best.ids, influence.word_positions(best.pieces, word)))
    t_word = time.perf_counter() - t0
    print(f"one word's attribution ('{word}'): {t_word * 1000:.0f} ms beside {t_translate * 1000:.0f} ms for the "
          f"beam-5 translation ({t_word / t_translate:.2f}x)")
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0
