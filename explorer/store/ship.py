"""Turn a run's checkpoint into a shipped one: `python -m explorer.store.ship SRC DST --name NAME --test TSV`.

Shipped checkpoints (checkpoints/<name>/) hold float16 weights (half the size; loading upcasts),
no optimizer state, and the held-out test split as test.tsv so the app has examples with
references and `python -m explorer.evaluate` can score it without rebuilding the corpus.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch

from explorer.files.names import TEST_SPLIT
from explorer.store.checkpoint import CheckpointError, load_checkpoint, read_card, save_checkpoint


def ship(src: str | Path, dst: str | Path, name: str | None = None, test_tsv: str | Path | None = None,
         run_name: str | None = None) -> Path:
    loaded = load_checkpoint(src)
    meta = loaded.meta
    training = dict(meta.get("training", {}))
    if run_name:
        training["run"] = run_name
    training["shipped_from"] = str(src)
    out = save_checkpoint(dst, loaded.model, loaded.tokenizer, dtype=torch.float16, card=read_card(src),
                          meta={"name": name or Path(dst).name, "src_lang": meta.get("src_lang"),
                                "tgt_lang": meta.get("tgt_lang"), "training": training})
    if test_tsv:
        shutil.copyfile(test_tsv, Path(out) / TEST_SPLIT)
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.store.ship", description=__doc__.split("\n")[0])
    parser.add_argument("src", help="a run checkpoint, e.g. runs/numbers/checkpoints/step_000900")
    parser.add_argument("dst", help="e.g. checkpoints/numbers-en-de")
    parser.add_argument("--name", help="display name (default: the destination folder name)")
    parser.add_argument("--run", help="group name shared by checkpoints of one training run")
    parser.add_argument("--test", help="TSV of the held-out test split to ship alongside")
    args = parser.parse_args(argv)
    try:
        out = ship(args.src, args.dst, args.name, args.test, args.run)
    except (CheckpointError, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"shipped {args.src} -> {out} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
