"""Transcoders on a shipped checkpoint's FFNs: how well each site's dictionary explains its FFN on held-out
rows, beside the random-decoder baseline, and what training costs.

    python -m benchmarks features [--checkpoint checkpoints/bible-es-en] [--site SITE ...] [--rows 200000]
                                  [--width 1024] [--k 32] [--steps 3000]

Per site: rows collected from the training split (at most --rows, drawn evenly) and 20,000 from the
development split (held out); a TopK skip transcoder trained on the first, and the random baseline (the
same k, width and skip, decoder directions random and frozen); printed for both: the fraction of variance
explained on the held-out rows (and a least-squares linear map's, the skip's share alone), the mean
active latents, the dead latents' share, the busiest latent's density; and the seconds spent collecting and training (the machine's load beside them: these machines are noisy).
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import torch

from explorer.data import load_corpus
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.features import metrics, sites
from explorer.studies.features import transcoder as tcm
from explorer.studies.common.training_data import dataset_of, training_pairs

HELD_ROWS = 20_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks features")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--site", action="append", help="an FFN site (default: every one)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--width", type=int, default=tcm.TrainSettings.width)
    parser.add_argument("--k", type=int, default=tcm.TrainSettings.k)
    parser.add_argument("--steps", type=int, default=tcm.TrainSettings.steps)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = load_checkpoint(args.checkpoint)
    train_pairs, dev = training_pairs(ckpt.meta), load_corpus(dataset_of(ckpt.meta)).dev
    settings = tcm.TrainSettings(width=args.width, k=args.k, steps=args.steps)
    print(f"{ckpt.name}: width {settings.width}, k {settings.k}, {settings.steps} steps of {settings.batch} rows")
    for site in args.site or sites.sites(ckpt.model):
        t0 = time.perf_counter()
        rows = sites.collect(ckpt.model, ckpt.tokenizer, train_pairs, site, args.rows)
        held = sites.collect(ckpt.model, ckpt.tokenizer, dev, site, HELD_ROWS, seed=1)
        t1 = time.perf_counter()
        trained = tcm.train(rows.inputs, rows.outputs, settings)
        t2 = time.perf_counter()
        random = tcm.train(rows.inputs, rows.outputs, replace(settings, random_decoder=True))
        got, base = (metrics.quality(t, held.inputs, held.outputs) for t in (trained, random))
        linear = metrics.linear_fve(rows.inputs, rows.outputs, held.inputs, held.outputs)
        print(f"{site:22s} FVE {got.fve:.3f} (random {base.fve:.3f}, +{got.fve - base.fve:.3f}; linear map "
              f"{linear:.3f})  L0 {got.l0:.1f}  "
              f"dead {got.dead_fraction:.1%} (random {base.dead_fraction:.1%})  busiest {got.max_density:.1%}  "
              f"rows {len(rows.inputs):,}/{len(held.inputs):,}  collect {t1 - t0:.0f} s  train {t2 - t1:.0f} s  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0
