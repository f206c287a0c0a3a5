"""`python -m explorer heads CHECKPOINT`: the head lab on a checkpoint's held-out test pairs.

Prints the estimated cost first, then the tables (explorer.studies.heads.report), and writes the JSON
(explorer.studies.heads.job) atomically to --out (default: head_lab.json beside the current directory).
Every argument is checked before the checkpoint is loaded: counts within explorer.studies.heads.job.RANGES,
a device this machine has, an --out that can be written (explorer.files.user_files), so a slip is
refused at once in one line rather than after the run or with a traceback.
"""
from __future__ import annotations

import sys

from explorer.files.names import HEAD_LAB_OUT
from explorer.runtime.split import from_env
from explorer.runtime.workers import add_workers, launch, resolve_workers, wants_launch
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, checkpoint_and_held_out, \
    finish, parse_checked, setting, settings_from, study_parser
from explorer.studies.common.sentences import FORCED
from explorer.studies.heads.importance import SINGLE_REMOVALS
from explorer.studies.heads.job import HEAD_LAB, RANGES, LabSettings


def build_parser():
    parser = study_parser("python -m explorer heads", __doc__)
    setting(parser, LabSettings, "sentences", "the first N held-out pairs", ranges=RANGES)
    setting(parser, LabSettings, "forced", "teacher-force the reference or the model's own greedy output",
            choices=FORCED)
    setting(parser, LabSettings, "seeds", "random removal orders, the baseline", ranges=RANGES)
    setting(parser, LabSettings, "points", "scored points per kind's pruning curve after the first; all kinds "
                                           "together: 2x", ranges=RANGES)
    add_out_and_device(parser, HEAD_LAB_OUT)
    add_checkpoint_languages(parser)
    add_workers(parser)
    setting(parser, LabSettings, "single_removal", "how each head removed alone is scored: bleu (exact) decodes "
            "the set without it; loss (approximate, faster) takes the rise of the teacher-forced loss alone and "
            "decodes no removal, so there is no BLEU drop per head", choices=tuple(SINGLE_REMOVALS))
    parser.add_argument("--no-reuse", action="store_true",
                        help="decode every sentence of every removal step by step, without first checking the "
                             "full model's outputs, and encode the sources again in every teacher-forced pass "
                             "(the slower paths the checks and the kept encoder output replaced; same numbers)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    settings = settings_from(args, LabSettings)
    loaded = checkpoint_and_held_out(args.checkpoint, args.device, args.src_lang, args.tgt_lang)
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    workers = resolve_workers(args.workers, min(args.sentences, len(pairs)))
    if wants_launch(workers):                       # everything is checked: the processes load their own copy
        del ckpt, loaded
        return launch("explorer.studies.heads", argv if argv is not None else sys.argv[1:], workers)
    return finish(HEAD_LAB, args.out, ckpt.model, ckpt.tokenizer, pairs, settings, meta=ckpt.meta,
                  split=from_env(), reuse=not args.no_reuse)


if __name__ == "__main__":
    sys.exit(main())
