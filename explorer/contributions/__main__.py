"""`python -m explorer contributions CHECKPOINT`: ALTI+ source and target contributions over a test set.

Per sentence: its tokens, each output token's source share and the rolled-out contributions over [source;
target prefix] (explorer.contributions.job), written atomically to --out. --detached-check instead measures
how well the source share tells a source's own reference from another pair's (explorer.contributions.
detached); --alignment scores each layer's cross contributions as a word aligner beside raw attention
(explorer.contributions.alignment); --faithfulness removes the source tokens each explanation ranks
highest (explorer.contributions.faithfulness); --over-training gives the mean source share at each
checkpoint of the run (explorer.contributions.training). Every argument is checked before the checkpoint is loaded, and a
--pairs or --gold file is read first, so a slip is refused at once in one line.
"""
from __future__ import annotations

import sys
from functools import partial

from explorer.contributions.faithfulness import METHODS, RANGES as FAITH_RANGES
from explorer.contributions.job import RANGES
from explorer.evaluation.arguments import CommandParser, count, device, parse_checked
from explorer.files.names import CONTRIBUTIONS_OUT
from explorer.heads.sentences import FORCED

GOLD_PAIRS = (1, 20_000)                 # explorer.align.gold.MAX_PAIRS: no gold file holds more


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer contributions", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--pairs", help="a TSV of source<TAB>reference lines (default: the checkpoint's held-out "
                                        "test pairs)")
    parser.add_argument("--forced", choices=FORCED, default="reference",
                        help="teacher-force the reference (default) or the model's own greedy output")
    parser.add_argument("--sentences", type=count("sentences", *RANGES["sentences"]), default=200,
                        help="the first N pairs (default 200, at most %d)" % RANGES["sentences"][1])
    parser.add_argument("--per-layer", action="store_true",
                        help="also write every layer's encoder, decoder-self and cross contribution matrices")
    check = parser.add_mutually_exclusive_group()
    check.add_argument("--detached-check", action="store_true",
                       help="instead: each source forced on its own reference and on another pair's; the AUROC "
                            "of the mean source share (and of the log-probability) telling them apart")
    check.add_argument("--faithfulness", action="store_true",
                       help="instead: the faithfulness scorecard (ERASER's comprehensiveness and sufficiency with "
                            "source tokens replaced by unk) of every explanation beside random rankings")
    check.add_argument("--alignment", action="store_true",
                       help="instead: AER per layer of the cross contributions beside raw attention, on --gold "
                            "or the checkpoint's gold set")
    check.add_argument("--over-training", action="store_true",
                       help="instead: the mean source share at each checkpoint of this checkpoint's run found "
                            "beside it (the shipped epoch-1 and final Bible models; the numbers run's steps), "
                            "all forced on this checkpoint's first N held-out references")
    parser.add_argument("--gold", help="with --alignment: a gold file (source ||| target ||| links)")
    parser.add_argument("--gold-pairs", type=count("gold pairs", *GOLD_PAIRS), default=200,
                        help="with --alignment: the first N gold pairs (default 200)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                        help="with --faithfulness: the explanations scored (default: all)")
    parser.add_argument("--seeds", type=count("seeds", *FAITH_RANGES["seeds"]), default=3,
                        help="with --faithfulness: random rankings, the baseline (default 3)")
    parser.add_argument("--ig-steps", type=count("ig steps", *FAITH_RANGES["ig_steps"]), default=16,
                        help="with --faithfulness: integrated-gradients path points (default 16)")
    parser.add_argument("--workers", type=count("workers", 1, 64), default=1,
                        help="with --faithfulness: worker processes over sentences, one thread each (default 1; "
                             "the same numbers with any count)")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="with --faithfulness: instead of measuring, put together scorecards of consecutive parts "
                             "of a test set (each run with --pairs of its part) into one table")
    parser.add_argument("--out", default=CONTRIBUTIONS_OUT, help=f"the JSON file to write (default {CONTRIBUTIONS_OUT})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    return parser


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    if (args.detached_check or args.faithfulness or args.over_training) and args.forced != "reference":
        return _refuse("--detached-check, --faithfulness and --over-training force references; drop --forced")
    if args.gold and not args.alignment:
        return _refuse("--gold is read only with --alignment")
    if args.combine and not args.faithfulness:
        return _refuse("--combine puts faithfulness scorecards together: add --faithfulness")

    from explorer.align.gold import GoldError
    from explorer.align.gold_sets import default_gold, user_gold
    from explorer.contributions import alignment, detached, faithfulness, job, training
    from explorer.data import DataError
    from explorer.data.files import read_tsv
    from explorer.evaluation.scores import held_out_pairs
    from explorer.files.limits import RESULT_BYTES
    from explorer.files.user_files import UserFileError, read_user_json
    from explorer.runtime.progress import run_command
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    parts = []
    for name in args.combine or []:                 # a user's paths: regular files, bounded, never a FIFO's wait
        try:
            part = read_user_json(name, RESULT_BYTES)
        except UserFileError as err:                # what the path is: a device, a FIFO, too large
            return _refuse(f"--combine {err}")
        except (ValueError, RecursionError):
            part = None
        if not (isinstance(part, dict) and all(k in part for k in ("settings", "per_sentence"))):
            return _refuse(f"--combine {name}: not a faithfulness scorecard JSON")
        parts.append(part)
    try:                                            # the user's files first: read before the checkpoint is loaded
        pairs = read_tsv(args.pairs) if args.pairs else None
        gold, gold_name = user_gold(args.gold) if args.gold else (None, "")
    except (DataError, GoldError) as err:
        return _refuse(f"--{'pairs' if args.pairs and not args.gold else 'gold'} {err}")
    try:
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
        if pairs is None and not (args.alignment and gold is not None):
            pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
        if args.alignment and gold is None:
            gold, gold_name = default_gold(ckpt.meta, pairs or [])
    except (CheckpointError, DataError, GoldError, ValueError) as err:
        return _refuse(str(err))
    common = dict(model=ckpt.model, tokenizer=ckpt.tokenizer, meta=ckpt.meta)
    if args.detached_check:
        run = partial(job.run_to_file, detached.run_detached_check, args.out, pairs=pairs,
                      sentences=args.sentences, **common)
        return run_command(run, detached.report, args.out)
    if args.combine:
        run = partial(job.run_to_file, lambda **_: faithfulness.combine(parts, ckpt.meta.get("weights_sha256", "")),
                      args.out)
        return run_command(run, faithfulness.report, args.out)
    if args.faithfulness:                          # under torchrun: each process its share of the sentences
        from explorer.runtime.split import from_env
        from explorer.runtime.workers import run_split_command

        settings = faithfulness.FaithfulnessSettings(methods=tuple(args.methods), seeds=args.seeds,
                                                     ig_steps=args.ig_steps)
        split = from_env()
        run = partial(job.run_to_file, faithfulness.run_faithfulness, args.out, pairs=pairs,
                      sentences=args.sentences, settings=settings, workers=args.workers, split=split, **common)
        return run_split_command(run, faithfulness.report, args.out, split)
    if args.over_training:
        run = partial(job.run_to_file, training.run_over_training, args.out, pairs=pairs,
                      sentences=args.sentences, path=ckpt.path, **common)
        return run_command(run, training.report, args.out)
    if args.alignment:
        run = partial(job.run_to_file, alignment.run_alignment, args.out, gold=gold, pairs=args.gold_pairs,
                      gold_name=gold_name, **common)
        return run_command(run, alignment.report, args.out)
    settings = job.ContributionSettings(sentences=args.sentences, forced=args.forced, per_layer=args.per_layer)
    run = partial(job.run_to_file, job.run_contributions, args.out, pairs=pairs, settings=settings, **common)
    return run_command(run, job.report, args.out)


if __name__ == "__main__":
    sys.exit(main())
