"""`python -m explorer patch CHECKPOINT --clean TEXT --corrupt TEXT --out FILE.json` (or `--pairs TSV`
of clean<TAB>corrupt lines, the grids averaged): activation patching on minimal pairs.

Also `python -m explorer patch ...` (the command door). Writes the JSON atomically (explorer.studies.patching.job):
every grid normalised (denoise: the share of the clean-vs-corrupted logit difference restored; noise:
the share destroyed) and the logit difference it is normalised by. Every argument is checked before the
checkpoint is loaded (a device this machine has, an --out that can be written), and a pair that cannot
be patched is refused in one line.
"""
from __future__ import annotations

import sys

from explorer.evaluation.arguments import ArgumentsError
from explorer.files.names import PATCHING_OUT
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, finish, open_checkpoint, \
    parse_checked, refuse, study_parser
from explorer.studies.patching.job import read_pairs
from explorer.store.checkpoint import CheckpointError
from explorer.studies.patching.job import PATCHING


def build_parser():
    parser = study_parser("python -m explorer patch", __doc__)
    parser.add_argument("--clean", help="the clean source text")
    parser.add_argument("--corrupt", help="the same text with one word changed (as many pieces)")
    parser.add_argument("--pairs", help="a TSV file of clean<TAB>corrupt lines instead (grids averaged)")
    add_out_and_device(parser, PATCHING_OUT)
    add_checkpoint_languages(parser)
    return parser


def texts_of(args) -> list[tuple[str, str]]:
    """The pairs the arguments name: --clean and --corrupt together, or --pairs alone."""
    if args.pairs is not None:
        if args.clean is not None or args.corrupt is not None:
            raise ArgumentsError("give --pairs or --clean/--corrupt, not both")
        return read_pairs(args.pairs)
    if args.clean is None or args.corrupt is None:
        raise ArgumentsError("give --clean and --corrupt (or --pairs TSV)")
    return [(args.clean, args.corrupt)]


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    try:
        texts = texts_of(args)
        ckpt = open_checkpoint(args)
    except (CheckpointError, ValueError) as err:
        return refuse(str(err))
    return finish(PATCHING, args.out, ckpt.model, ckpt.tokenizer, texts, meta=ckpt.meta)


if __name__ == "__main__":
    sys.exit(main())
