"""How fast the head lab could be made without changing a number: its floor at base size, and what the
exact savings left would buy on `small`.

At base size the head lab's cost is the output projection (d_model 512 x 58,101 pieces): every decoded or
teacher-forced piece goes through it, and the exact answers need it whole (the greedy argmax and its
margin, the loss's normaliser). Printed:
* the projection's speed, one thread, best of 5, by kernel and rows: torch's F.linear (the module path the
  teacher-forced passes take) and the decoding path's own product (explorer.model.plain_decoder: oneDNN's
  packed layout);
* the floor: the pieces the defaults (200 sentences, 3 seeds) send through it, counted from below (each
  sentence's reference words + EOS: any subword vocabulary reads a word in one piece or more, and a random
  model's outputs run longer), times 2 x 512 x 58,101 FLOPs, at the fastest rate measured, on every core;
* on `small` (bible-es-en), the two exact savings not taken: the steps that finished rows spend on padding
  in the greedy batches (a batch runs until its longest output ends), and decoding K removals in one batch
  of 32 x K rows against K batches of 32 (interleaved rounds, CPU seconds, the same outputs checked).

`python -m benchmarks head-lab-floor [--sentences 200] [--removals 4]`
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from types import SimpleNamespace

import torch

from explorer.files.places import REPO_ROOT
from explorer.runtime.workers import cores

SMALL = REPO_ROOT / "checkpoints" / "bible-es-en"
D_MODEL, VOCAB = 512, 58101                       # OPUS-MT base: Marian's d_model and vocabulary


@torch.no_grad()
def projection_rates(repeats: int = 5) -> dict[str, float]:
    """GFLOP/s of x [rows, 512] times the 58,101-piece projection, one thread, best of `repeats`: the
    module's F.linear and the decoding path's own product (plain_decoder's: oneDNN's packed layout where
    this torch has it, named as it ran)."""
    from explorer.model.plain_decoder import _product, packing_works

    projection = torch.nn.Linear(D_MODEL, VOCAB, bias=False)                              # weight [V, d]
    decoding = _product(projection)
    decoding_name = "oneDNN packed" if packing_works(projection.weight) else "input-major copy"
    rates = {}
    for rows in (32, 1024):
        x = torch.randn(rows, D_MODEL)                                                     # [rows, d]
        kernels = {"F.linear": lambda: projection(x), decoding_name: lambda: decoding(x)}
        for name, product in kernels.items():
            product()
            best = min(_seconds(product) for _ in range(repeats))
            rates[f"{name}, {rows} rows"] = 2 * rows * D_MODEL * VOCAB / best / 1e9
    return rates


def _seconds(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def floor_minutes(rate_gflops: float, sentences: int) -> tuple[int, int, int, float]:
    """(decodes, loss passes, pieces per pass, minutes on every core) of the defaults at base size."""
    from explorer.config import preset
    from explorer.evaluation.comparison import test_pairs
    from explorer.studies.heads.job import LabSettings, estimate_cost
    from explorer.store.checkpoint import read_config

    base = SimpleNamespace(cfg=preset("base", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB))
    cost = estimate_cost(base, LabSettings(sentences=sentences), sentences)
    pairs, _ = test_pairs(SMALL, read_config(SMALL)[0], sentences)
    pieces = sum(len(p.tgt.split()) + 1 for p in pairs)                                   # words + EOS, from below
    losses = cost.heads + 1                                                               # the full model + each head
    flops = (cost.decodes + losses) * pieces * 2 * D_MODEL * VOCAB
    return cost.decodes, losses, pieces, flops / (rate_gflops * 1e9) / cores() / 60


def small_savings(sentences: int, removals: int) -> None:
    """Padding steps of the greedy batches and the removal-batching ratio on bible-es-en, one thread."""
    from explorer.evaluation.comparison import test_pairs
    from explorer.studies.common.sentences import build_sentences, length_batches
    from explorer.studies.heads.verify import greedy_outputs
    from explorer.store.checkpoint import load_checkpoint

    ckpt = load_checkpoint(SMALL)
    model = ckpt.model.eval()
    pairs, _ = test_pairs(SMALL, ckpt.meta, sentences)
    src = build_sentences(model, ckpt.tokenizer, pairs, sentences).src
    outputs = greedy_outputs(model, src, 32)
    used = padded = 0
    for idx in length_batches(src, 32):                                                   # greedy_outputs' batches
        lengths = [len(outputs[i][0]) for i in idx]
        used, padded = used + sum(lengths), padded + len(lengths) * max(lengths) - sum(lengths)
    print(f"small: greedy batches of 32 over {len(src)} sentences: {used} row-steps used, {padded} spent on "
          f"finished rows ({padded / (used + padded):.0%}): what dropping finished rows could save", flush=True)
    copies = [s for s in src for _ in range(removals)]                                     # sentence i's K rows adjacent
    apart = together = 0.0
    for _ in range(2):                                                                    # interleaved rounds
        start = time.process_time()
        for _ in range(removals):
            greedy_outputs(model, src, 32)
        apart += time.process_time() - start
        start = time.process_time()
        joined = greedy_outputs(model, copies, 32 * removals)
        together += time.process_time() - start
    same = joined[::removals] == outputs
    print(f"small: {removals} removals decoded apart (batches of 32) {apart / 2:.2f} s CPU, together (batches of "
          f"{32 * removals}) {together / 2:.2f} s CPU: {apart / together:.2f}x; the same outputs: {same}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks head-lab-floor", description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=200, help="the head lab's sentences (default 200)")
    parser.add_argument("--removals", type=int, default=4, help="removals batched together on small (default 4)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{cores()} cores; load average {os.getloadavg()[0]:.1f} at the start; one thread", flush=True)
    rates = projection_rates()
    for name, rate in rates.items():
        print(f"projection 512 x {VOCAB:,}, {name}: {rate:.1f} GFLOP/s", flush=True)
    best = max(rates.values())
    decodes, losses, pieces, minutes = floor_minutes(best, args.sentences)
    print(f"base head lab, defaults: {decodes} greedy decodes + {losses} teacher-forced loss passes of the set, "
          f">= {pieces:,} pieces each: the projection alone at {best:.1f} GFLOP/s a core takes >= {minutes:.1f} "
          f"min on {cores()} cores", flush=True)
    small_savings(args.sentences, args.removals)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
