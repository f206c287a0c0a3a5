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

import torch

from explorer.data import load_corpus
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.features import sites
from explorer.studies.features.job import FeatureSettings, train_site
from explorer.studies.common.training_data import dataset_of, training_pairs

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks features")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--site", action="append", help="an FFN site (default: every one)")
    parser.add_argument("--rows", type=int, default=FeatureSettings.rows)
    parser.add_argument("--width", type=int, default=FeatureSettings.width)
    parser.add_argument("--k", type=int, default=FeatureSettings.k)
    parser.add_argument("--steps", type=int, default=FeatureSettings.steps)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = load_checkpoint(args.checkpoint)
    train_pairs, dev = training_pairs(ckpt.meta), load_corpus(dataset_of(ckpt.meta)).dev
    settings = FeatureSettings(width=args.width, k=args.k, steps=args.steps, rows=args.rows)
    print(f"{ckpt.name}: width {settings.width}, k {settings.k}, {settings.steps} steps of {settings.batch} rows")
    for site in args.site or sites.sites(ckpt.model):
        row, _, seconds = train_site(ckpt.model, ckpt.tokenizer, train_pairs, dev, site, settings)
        print(f"{site:22s} FVE {row['fve']:.3f} (random {row['fve_random']:.3f}, +{row['fve'] - row['fve_random']:.3f}; "
              f"linear map {row['fve_linear']:.3f})  L0 {row['l0']:.1f}  dead {row['dead_fraction']:.1%} (random "
              f"{row['dead_fraction_random']:.1%})  busiest {row['max_density']:.1%}  rows {row['rows']:,}/"
              f"{row['held_rows']:,}  collect {seconds['collect']:.0f} s  train {seconds['train']:.0f} s  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0
