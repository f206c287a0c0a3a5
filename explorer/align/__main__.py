"""`python -m explorer align CHECKPOINT [--gold FILE] [--out FILE]`: the alignment scorecard.

Scores every aligner (cross-attention heads and layers, naive and Shift-Att, value-norm weighted;
gradient x input; integrated gradients; eflomal) against a gold set: the file given, else the one
that ships for the checkpoint (explorer.align.gold_sets). Prints the table, writes the JSON atomically.
The arguments, an --out that can be written and a --gold file that can be read (explorer.store.
user_files) are checked before the checkpoint is loaded: a slip is refused at once, in one line.
"""
from __future__ import annotations

import sys
from functools import partial

from explorer.align.scorecard import RANGES
from explorer.evaluation.arguments import CommandParser, count, device, parse_checked
from explorer.files.names import ALIGNMENT_OUT
from explorer.runtime.workers import add_workers, launch, resolve_workers, run_split_command, wants_launch


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer align", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--gold", help="a gold file: source ||| target ||| links (i-j sure, i?j possible), "
                                       "one pair per line; default: the checkpoint's shipped gold set")
    parser.add_argument("--out", default=ALIGNMENT_OUT, help=f"the JSON file to write (default {ALIGNMENT_OUT})")
    parser.add_argument("--pairs", type=count("pairs", *RANGES["pairs"]), default=200,
                        help="the first N gold pairs (default 200, at most %d)" % RANGES["pairs"][1])
    parser.add_argument("--attribution-pairs", type=count("attribution pairs", *RANGES["attribution_pairs"]),
                        default=60, help="gradient methods on the first N of them (default 60; 0 skips them)")
    parser.add_argument("--ig-steps", type=count("ig steps", *RANGES["ig_steps"]), default=32,
                        help="integrated-gradients path points (default 32, %d to %d)" % RANGES["ig_steps"])
    parser.add_argument("--no-eflomal", action="store_true", help="leave out the statistical aligner")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    add_workers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    from explorer.align.job import run_to_file, training_pairs
    from explorer.align.gold import GoldError
    from explorer.align.gold_sets import default_gold, held_out_share, user_gold
    from explorer.align.pairs import model_pairs
    from explorer.align.report import report
    from explorer.align.scorecard import AlignSettings
    from explorer.data import DataError
    from explorer.evaluation.scores import held_out_pairs
    from explorer.runtime.split import from_env
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    settings = AlignSettings(pairs=args.pairs, attribution_pairs=args.attribution_pairs,
                             ig_steps=args.ig_steps, eflomal=not args.no_eflomal)
    try:
        gold, name = user_gold(args.gold) if args.gold else (None, "")
    except GoldError as err:                        # read before the checkpoint is loaded
        print(f"error: --gold {err}", file=sys.stderr)
        return 2
    try:
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
        try:
            held, _ = held_out_pairs(ckpt.path, ckpt.meta)
        except DataError:
            held = []
        if gold is None:
            gold, name = default_gold(ckpt.meta, held)
    except (CheckpointError, GoldError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    usable = len(model_pairs(ckpt.model, ckpt.tokenizer, list(gold)[:args.pairs])[0])
    if not usable:                                  # said here, before any process is started for it
        print("error: no gold pair can be read by this model word for word (see explorer.align.pairs)", file=sys.stderr)
        return 2
    workers = resolve_workers(args.workers, usable)
    if wants_launch(workers):                       # everything is checked: the processes load their own copy
        del ckpt
        return launch("explorer.align", argv if argv is not None else sys.argv[1:], workers)
    split = from_env()
    return run_split_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, gold, settings, args.out,
                                     meta=ckpt.meta, gold_name=name, split=split,
                                     held_out=held_out_share(gold, held) if held else None,
                                     train_pairs=lambda: training_pairs(ckpt.meta, held)), report, args.out, split)


if __name__ == "__main__":
    sys.exit(main())
