"""`python -m explorer heads CHECKPOINT`: the head lab on a checkpoint's held-out test pairs.

Prints the estimated cost first, then the tables (explorer.heads.report), and writes the JSON
(explorer.heads.job) atomically to --out (default: head_lab.json beside the current directory).
Every argument is checked before the checkpoint is loaded: counts within explorer.heads.job.RANGES,
a device this machine has, an --out that can be written (explorer.files.user_files), so a slip is
refused at once in one line rather than after the run or with a traceback.
"""
from __future__ import annotations

import sys
from functools import partial

from explorer.evaluation.arguments import CommandParser, checkpoint_and_held_out, count, device, parse_checked
from explorer.runtime.workers import add_workers, launch, resolve_workers, run_split_command, \
    wants_launch
from explorer.files.names import HEAD_LAB_OUT
from explorer.heads.importance import SINGLE_REMOVALS
from explorer.heads.job import RANGES
from explorer.heads.sentences import FORCED


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer heads", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--sentences", type=count("sentences", *RANGES["sentences"]), default=200,
                        help="the first N held-out pairs (default 200, at most %d)" % RANGES["sentences"][1])
    parser.add_argument("--out", default=HEAD_LAB_OUT, help=f"the JSON file to write (default {HEAD_LAB_OUT})")
    parser.add_argument("--forced", choices=FORCED, default="reference",
                        help="teacher-force the reference (default) or the model's own greedy output")
    parser.add_argument("--seeds", type=count("seeds", *RANGES["seeds"]), default=3,
                        help="random removal orders, the baseline (default 3, at most %d)" % RANGES["seeds"][1])
    parser.add_argument("--points", type=count("points", *RANGES["points"]), default=3,
                        help="scored points per kind's pruning curve after the first; all kinds together: 2x "
                             "(default 3, at most %d)" % RANGES["points"][1])
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    add_workers(parser)
    parser.add_argument("--single-removal", choices=tuple(SINGLE_REMOVALS), default="bleu",
                        help="how each head removed alone is scored: bleu (default, exact) decodes the set without "
                             "it; loss (approximate, faster) takes the rise of the teacher-forced loss alone and "
                             "decodes no removal, so there is no BLEU drop per head")
    parser.add_argument("--no-reuse", action="store_true",
                        help="decode every sentence of every removal step by step, without first checking the "
                             "full model's outputs, and encode the sources again in every teacher-forced pass "
                             "(the slower paths the checks and the kept encoder output replaced; same numbers)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    from explorer.heads.job import LabSettings, run_to_file
    from explorer.heads.report import report
    from explorer.runtime.split import from_env

    split = from_env()
    settings = LabSettings(sentences=args.sentences, forced=args.forced, seeds=args.seeds, points=args.points,
                           single_removal=args.single_removal)
    loaded = checkpoint_and_held_out(args.checkpoint, args.device)
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    workers = resolve_workers(args.workers, min(args.sentences, len(pairs)))
    if wants_launch(workers):                       # everything is checked: the processes load their own copy
        del ckpt, loaded
        return launch("explorer.heads", argv if argv is not None else sys.argv[1:], workers)
    return run_split_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, pairs, settings, args.out,
                                     meta=ckpt.meta, split=split, reuse=not args.no_reuse), report, args.out, split)


if __name__ == "__main__":
    sys.exit(main())
