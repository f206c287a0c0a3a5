"""Transcoders on a shipped checkpoint's FFNs: how well each site's dictionary explains its FFN on held-out
rows, beside the random-decoder baseline, and what training costs.

    python -m benchmarks features [--checkpoint checkpoints/bible-es-en] [--site SITE ...] [--rows 200000]
                                  [--width 1024] [--k 32] [--steps 3000]
    python -m benchmarks features --detect [--checkpoint ...] [--pairs 1000] [--words 50]

Per site: rows collected from the training split (at most --rows, drawn evenly) and 20,000 from the
development split (held out); a TopK skip transcoder trained on the first, and the random baseline (the
same k, width and skip, decoder directions random and frozen); printed for both: the fraction of variance
explained on the held-out rows (and a least-squares linear map's, the skip's share alone), the mean
active latents, the dead latents' share, the busiest latent's density; and the seconds spent collecting and training (the machine's load beside them: these machines are noisy).

--detect: the dictionaries `python -m explorer features train` saved, each encoder site's and its random
baseline's, asked which single feature best detects each of the --words most frequent word pairs the
training data ties both ways (explorer.studies.grounding.links.mutual_pairs), over the source pieces of
the first --pairs development pairs (explorer.studies.features.detection): the median best F1 of each,
and the words each detects best and worst.
"""
from __future__ import annotations

import argparse
import os

import numpy as np
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
    parser.add_argument("--detect", action="store_true", help="word detection by the saved dictionaries")
    parser.add_argument("--pairs", type=int, default=1000, help="--detect: development pairs read")
    parser.add_argument("--words", type=int, default=50, help="--detect: word pairs asked about")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    if args.detect:
        return detect(args)
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


def detect(args) -> int:
    from explorer.studies.features.detection import detect as run
    from explorer.studies.features.job import load_all
    from explorer.studies.grounding.build import ensure
    from explorer.studies.grounding.links import mutual_pairs

    ckpt = load_checkpoint(args.checkpoint)
    dictionaries = load_all(ckpt.model, ckpt.meta["weights_sha256"])
    word_pairs = mutual_pairs(ensure(args.checkpoint, ckpt.meta).links, args.words)
    held = load_corpus(dataset_of(ckpt.meta)).dev[:args.pairs]
    print(f"{ckpt.name}: {len(word_pairs)} word pairs tied both ways, the most frequent first: "
          + ", ".join(f"{s}-{t} ({n})" for s, t, n in word_pairs[:8]) + f" ...; {len(held)} development pairs")
    for site in [s for s in dictionaries if s.startswith("encoder.")]:
        found = {kind: run(ckpt.model, ckpt.tokenizer, held, site, tc, [s for s, _, _ in word_pairs])
                 for kind, tc in dictionaries[site].items()}
        got, base = found["trained"], found["random"]
        order = np.argsort(-got.best_f1)
        print(f"{site:22s} median best F1 {got.median:.3f} (random {base.median:.3f}, {got.median - base.median:+.3f}) "
              f"over {len(got.words)} words; best: " + ", ".join(f"{got.words[i]} {got.best_f1[i]:.2f}" for i in order[:4])
              + "; worst: " + ", ".join(f"{got.words[i]} {got.best_f1[i]:.2f}" for i in order[-3:]), flush=True)
    return 0
