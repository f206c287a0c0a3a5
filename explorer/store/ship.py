"""Turn a run's checkpoint into a shipped one: `python -m explorer ship SRC DST --name NAME --test TSV`.

Shipped checkpoints (checkpoints/<name>/) hold float16 weights (half the size; loading upcasts),
no optimizer state, and the held-out test split as test.tsv so the app has examples with
references and `python -m explorer evaluate` can score it without rebuilding the corpus.

DST is written as the converter writes its output (explorer.store.output_dirs): a new or empty folder,
or one this command shipped before (`--overwrite` if it was edited since), never a folder holding
files it did not write (a user's notes, an older checkpoint shipped by hand: remove it first), and
never inside SRC (output_dirs). The test file is read and checked as pairs before the
destination is touched (a regular file of at most explorer.data.files.DEFAULT_MAX_BYTES: /dev/zero or
a FIFO is refused, not copied until the disk is full), and it is written inside the new folder, so the
folder is whole with it or not there at all.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from explorer.data import DataError
from explorer.data.files import DEFAULT_MAX_BYTES, parse_tsv
from explorer.files.names import TEST_SPLIT
from explorer.files.user_files import UserFileError, read_user_file
from explorer.store.checkpoint import CheckpointError, load_checkpoint, read_card, save_checkpoint
from explorer.store.display_name import display_name
from explorer.store.output_dirs import OutputRefused, check_output_dir

TOOL = "explorer ship"


def ship(src: str | Path, dst: str | Path, name: str | None = None, test_tsv: str | Path | None = None,
         run_name: str | None = None, overwrite: bool = False) -> Path:
    inputs = [src] + ([test_tsv] if test_tsv else [])
    check_output_dir(dst, TOOL, overwrite=overwrite, inputs=inputs)        # before anything is read
    test = None
    if test_tsv:
        try:
            test = read_user_file(test_tsv, DEFAULT_MAX_BYTES)
        except UserFileError as err:
            raise DataError(f"--test {err}") from None
        parse_tsv(test, str(test_tsv))                                   # pairs, or DataError with the line
    loaded = load_checkpoint(src)
    meta = loaded.meta
    training = dict(meta.get("training", {}))
    if run_name:
        training["run"] = run_name
    training["shipped_from"] = str(src)
    return Path(save_checkpoint(dst, loaded.model, loaded.tokenizer, dtype=torch.float16, card=read_card(src),
                                meta={"name": name or Path(dst).name, "src_lang": meta.get("src_lang"),
                                      "tgt_lang": meta.get("tgt_lang"), "training": training},
                                output_of=TOOL, overwrite=overwrite, inputs=tuple(inputs),
                                extra_files={TEST_SPLIT: test} if test is not None else None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer ship", description=__doc__.split("\n")[0])
    parser.add_argument("src", help="a run checkpoint, e.g. runs/numbers/checkpoints/step_000900")
    parser.add_argument("dst", help="e.g. checkpoints/numbers-en-de: a new or empty folder, or one shipped before")
    parser.add_argument("--name", type=display_name, help="display name (default: the destination folder name)")
    parser.add_argument("--run", type=display_name, help="group name shared by checkpoints of one training run")
    parser.add_argument("--test", help="TSV of the held-out test split to ship alongside")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a folder this command shipped before even if it was edited since")
    args = parser.parse_args(argv)
    try:
        out = ship(args.src, args.dst, args.name, args.test, args.run, overwrite=args.overwrite)
    except (CheckpointError, DataError, OutputRefused, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"shipped {args.src} -> {out} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
