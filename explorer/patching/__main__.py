"""`python -m explorer patch CHECKPOINT --clean TEXT --corrupt TEXT --out FILE.json` (or `--pairs TSV`
of clean<TAB>corrupt lines, the grids averaged): activation patching on minimal pairs.

Also `python -m explorer patch ...` (the command door). Writes the JSON atomically (explorer.patching.job):
every grid normalised (denoise: the share of the clean-vs-corrupted logit difference restored; noise:
the share destroyed) and the logit difference it is normalised by. Every argument is checked before the
checkpoint is loaded (a device this machine has, an --out that can be written), and a pair that cannot
be patched is refused in one line.
"""
from __future__ import annotations

import sys
from functools import partial

from explorer.files.names import PATCHING_OUT
from explorer.evaluation.arguments import ArgumentsError, CommandParser, device, parse_checked


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer patch", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--clean", help="the clean source text")
    parser.add_argument("--corrupt", help="the same text with one word changed (as many pieces)")
    parser.add_argument("--pairs", help="a TSV file of clean<TAB>corrupt lines instead (grids averaged)")
    parser.add_argument("--out", default=PATCHING_OUT, help=f"the JSON file to write (default {PATCHING_OUT})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    return parser


def texts_of(args) -> list[tuple[str, str]]:
    """The pairs the arguments name: --clean and --corrupt together, or --pairs alone."""
    if args.pairs is not None:
        if args.clean is not None or args.corrupt is not None:
            raise ArgumentsError("give --pairs or --clean/--corrupt, not both")
        from explorer.patching.job import read_pairs
        return read_pairs(args.pairs)
    if args.clean is None or args.corrupt is None:
        raise ArgumentsError("give --clean and --corrupt (or --pairs TSV)")
    return [(args.clean, args.corrupt)]


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    from explorer.patching.job import report, run_to_file
    from explorer.runtime.progress import run_command
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    try:
        texts = texts_of(args)
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
    except (CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return run_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, texts, args.out, meta=ckpt.meta),
                       report, args.out)


if __name__ == "__main__":
    sys.exit(main())
