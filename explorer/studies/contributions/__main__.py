"""`python -m explorer contributions CHECKPOINT`: ALTI+ source and target contributions over a test set.

Per sentence: its tokens, each output token's source share and the rolled-out contributions over [source;
target prefix] (explorer.studies.contributions.job), written atomically to --out. --detached-check instead measures
how well the source share tells a source's own reference from another pair's (explorer.studies.contributions.
detached); --alignment scores each layer's cross contributions as a word aligner beside raw attention
(explorer.studies.contributions.alignment); --faithfulness removes the source tokens each explanation ranks
highest (explorer.studies.contributions.faithfulness); --over-training gives the mean source share at each
checkpoint of the run (explorer.studies.contributions.training). Every argument is checked before the checkpoint is loaded, and a
--pairs or --gold file is read first, so a slip is refused at once in one line.
"""
from __future__ import annotations

import sys

from explorer.evaluation.arguments import count
from explorer.files.names import CONTRIBUTIONS_OUT
from explorer.runtime.split import from_env
from explorer.runtime.workers import add_workers, launch, resolve_workers, wants_launch
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, finish, open_checkpoint, \
    parse_checked, refuse, setting, settings_from, study_parser, switch
from explorer.studies.common.result import Study
from explorer.studies.common.sentences import FORCED
from explorer.studies.contributions.faithfulness import METHODS, RANGES as FAITH_RANGES, FaithfulnessSettings
from explorer.studies.contributions.job import RANGES, ContributionSettings
from explorer.studies.align.gold import GoldError
from explorer.studies.align.gold_sets import default_gold, user_gold
from explorer.data import DataError
from explorer.data.files import read_tsv
from explorer.evaluation.scores import held_out_pairs
from explorer.files.user_files import json_values_bound
from explorer.files.limits import RESULT_BYTES, RESULT_VALUES
from explorer.files.user_files import UserFileError, json_of, read_user_file
from explorer.store.checkpoint import CheckpointError
from explorer.studies.contributions import alignment, detached, faithfulness, training
from explorer.studies.contributions.job import CONTRIBUTIONS

GOLD_PAIRS = (1, 20_000)                 # explorer.studies.align.gold.MAX_PAIRS: no gold file holds more


def build_parser():
    parser = study_parser("python -m explorer contributions", __doc__)
    parser.add_argument("--pairs", help="a TSV of source<TAB>reference lines (default: the checkpoint's held-out "
                                        "test pairs)")
    setting(parser, ContributionSettings, "forced", "teacher-force the reference or the model's own greedy output",
            choices=FORCED)
    setting(parser, ContributionSettings, "sentences", "the first N pairs", ranges=RANGES)
    switch(parser, ContributionSettings, "per_layer",
           "also write every layer's encoder, decoder-self and cross contribution matrices")
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
    setting(parser, FaithfulnessSettings, "methods", "with --faithfulness: the explanations scored", nargs="+",
            choices=METHODS)
    setting(parser, FaithfulnessSettings, "seeds", "with --faithfulness: random rankings, the baseline",
            ranges=FAITH_RANGES)
    setting(parser, FaithfulnessSettings, "ig_steps", "with --faithfulness: integrated-gradients path points",
            ranges=FAITH_RANGES)
    add_workers(parser, "with --faithfulness: ")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="with --faithfulness: instead of measuring, put together scorecards of consecutive parts "
                             "of a test set (each run with --pairs of its part) into one table")
    add_out_and_device(parser, CONTRIBUTIONS_OUT)
    add_checkpoint_languages(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    if (args.detached_check or args.faithfulness or args.over_training) and args.forced != "reference":
        return refuse("--detached-check, --faithfulness and --over-training force references; drop --forced")
    if args.gold and not args.alignment:
        return refuse("--gold is read only with --alignment")
    if args.combine and not args.faithfulness:
        return refuse("--combine puts faithfulness scorecards together: add --faithfulness")

    parts = []
    for name in args.combine or []:                 # a user's paths: regular files, bounded, never a FIFO's wait
        try:
            raw = read_user_file(name, RESULT_BYTES)
        except UserFileError as err:                # what the path is: a device, a FIFO, too large
            return refuse(f"--combine {err}")
        try:                                        # the values counted first: memory bounded, not only bytes
            part = json_of(raw, name) if json_values_bound(raw) <= RESULT_VALUES else None
        except (ValueError, RecursionError, MemoryError):
            part = None
        if not (isinstance(part, dict) and all(k in part for k in ("settings", "per_sentence"))):
            return refuse(f"--combine {name}: not a faithfulness scorecard JSON")
        parts.append(part)
    try:                                            # the user's files first: read before the checkpoint is loaded
        pairs = read_tsv(args.pairs) if args.pairs else None
        gold, gold_name = user_gold(args.gold) if args.gold else (None, "")
    except (DataError, GoldError) as err:
        return refuse(f"--{'pairs' if args.pairs and not args.gold else 'gold'} {err}")
    try:
        ckpt = open_checkpoint(args)
        if pairs is None and not (args.alignment and gold is not None):
            pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
        if args.alignment and gold is None:
            gold, gold_name = default_gold(ckpt.meta, pairs or [])
    except (CheckpointError, DataError, GoldError, ValueError) as err:
        return refuse(str(err))
    model, tokenizer, meta = ckpt.model, ckpt.tokenizer, ckpt.meta
    if args.detached_check:
        return finish(detached.DETACHED, args.out, model, tokenizer, pairs, args.sentences, meta=meta)
    if args.combine:
        combined = Study("contributions", lambda context: faithfulness.combine(parts, meta.get("weights_sha256", "")),
                         (), faithfulness.report)
        return finish(combined, args.out, meta=meta)
    if args.faithfulness:                          # under torchrun: each process its share of the sentences
        settings = settings_from(args, FaithfulnessSettings, methods=tuple(args.methods))
        workers = resolve_workers(args.workers, min(args.sentences, len(pairs)))
        if wants_launch(workers):                  # everything is checked: the processes load their own copy
            del ckpt, model
            return launch("explorer.studies.contributions", argv if argv is not None else sys.argv[1:], workers)
        return finish(faithfulness.FAITHFULNESS, args.out, model, tokenizer, pairs, args.sentences, settings,
                      meta=meta, split=from_env())
    if args.over_training:
        return finish(training.OVER_TRAINING, args.out, model, tokenizer, pairs, args.sentences, meta=meta,
                      path=ckpt.path)
    if args.alignment:
        return finish(alignment.ALIGNMENT, args.out, model, tokenizer, gold, args.gold_pairs, meta=meta,
                      gold_name=gold_name)
    return finish(CONTRIBUTIONS, args.out, model, tokenizer, pairs, settings_from(args, ContributionSettings),
                  meta=meta)


if __name__ == "__main__":
    sys.exit(main())
