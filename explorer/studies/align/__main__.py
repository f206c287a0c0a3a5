"""`python -m explorer align CHECKPOINT [--gold FILE] [--out FILE]`: the alignment scorecard.

Scores every aligner (cross-attention heads and layers, naive and Shift-Att, value-norm weighted;
gradient x input; integrated gradients; eflomal) against a gold set: the file given, else the one
that ships for the checkpoint (explorer.studies.align.gold_sets). Prints the table, writes the JSON atomically.
The arguments, an --out that can be written and a --gold file that can be read (explorer.store.
user_files) are checked before the checkpoint is loaded: a slip is refused at once, in one line.
"""
from __future__ import annotations

import sys

from explorer.files.names import ALIGNMENT_OUT
from explorer.runtime.split import from_env
from explorer.runtime.workers import add_workers, launch, resolve_workers, wants_launch
from explorer.studies.align.scorecard import RANGES, AlignSettings
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, finish, open_checkpoint, \
    parse_checked, refuse, setting, settings_from, study_parser, switch
from explorer.data import DataError
from explorer.evaluation.scores import held_out_pairs
from explorer.store.checkpoint import CheckpointError
from explorer.studies.align.gold import GoldError
from explorer.studies.align.gold_sets import default_gold, held_out_share, user_gold
from explorer.studies.align.job import SCORECARD, training_pairs
from explorer.studies.align.pairs import model_pairs


def build_parser():
    parser = study_parser("python -m explorer align", __doc__)
    parser.add_argument("--gold", help="a gold file: source ||| target ||| links (i-j sure, i?j possible), "
                                       "one pair per line; default: the checkpoint's shipped gold set")
    setting(parser, AlignSettings, "pairs", "the first N gold pairs", ranges=RANGES)
    setting(parser, AlignSettings, "attribution_pairs", "gradient methods on the first N of them (0 skips them)",
            ranges=RANGES)
    setting(parser, AlignSettings, "ig_steps", "integrated-gradients path points", ranges=RANGES)
    switch(parser, AlignSettings, "eflomal", "leave out the statistical aligner")
    add_out_and_device(parser, ALIGNMENT_OUT)
    add_checkpoint_languages(parser)
    add_workers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    settings = settings_from(args, AlignSettings)
    try:
        gold, name = user_gold(args.gold) if args.gold else (None, "")
    except GoldError as err:                        # read before the checkpoint is loaded
        return refuse(f"--gold {err}")
    try:
        ckpt = open_checkpoint(args)
        try:
            held, _ = held_out_pairs(ckpt.path, ckpt.meta)
        except DataError:
            held = []
        if gold is None:
            gold, name = default_gold(ckpt.meta, held)
    except (CheckpointError, GoldError, ValueError) as err:
        return refuse(str(err))
    usable = len(model_pairs(ckpt.model, ckpt.tokenizer, list(gold)[:args.pairs])[0])
    if not usable:                                  # said here, before any process is started for it
        return refuse("no gold pair can be read by this model word for word (see explorer.studies.align.pairs)")
    workers = resolve_workers(args.workers, usable)
    if wants_launch(workers):                       # everything is checked: the processes load their own copy
        del ckpt
        return launch("explorer.studies.align", argv if argv is not None else sys.argv[1:], workers)
    return finish(SCORECARD, args.out, ckpt.model, ckpt.tokenizer, gold, settings, meta=ckpt.meta, split=from_env(),
                  gold_name=name, held_out=held_out_share(gold, held) if held else None,
                  train_pairs=lambda: training_pairs(ckpt.meta, held))


if __name__ == "__main__":
    sys.exit(main())
