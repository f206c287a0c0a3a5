"""`python -m explorer search CHECKPOINT [--beams 1,2,4,8,16,32] [--sentences N] [--exact] --out FILE.json`
(also `python -m explorer search ...`): the beam-size curve over a checkpoint's held-out pairs and, with
--exact, exact search (Stahlberg & Byrne 2019) for the search-error rate per beam size.

Writes the JSON atomically (explorer.studies.contrastive.job): `beam_curve`, one entry per length penalty and beam
size with beam, bleu, chrf, length_ratio, mean_score and search_errors (where known); `exact`, one entry
per sentence with proven, score and each beam size's score. Every argument is checked before the
checkpoint is loaded (sizes and counts within explorer.studies.contrastive.job.RANGES, a device this machine has,
an --out that can be written), so a slip is refused at once in one line.
"""
from __future__ import annotations

import argparse
import sys

from explorer.evaluation.arguments import count
from explorer.files.names import SEARCH_OUT
from explorer.runtime.split import from_env
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, checkpoint_and_held_out, \
    finish, parse_checked, refuse, setting, settings_from, study_parser, switch
from explorer.studies.contrastive.job import BEAM_CURVE, RANGES, SearchSettings
from explorer.studies.contrastive.curve import Penalty


def beam_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated beam sizes, each within RANGES["beam"], at most 16 of them."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts or len(parts) > 16:
        raise argparse.ArgumentTypeError(f"give 1 to 16 comma-separated beam sizes, not {text[:40]!r}")
    sizes = tuple(count("beam", *RANGES["beam"])(p) for p in parts)
    if len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"beam sizes must be distinct, not {text[:40]!r}")
    return sizes


def penalty_list(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated length penalties (none, average, gnmt, gnmt:ALPHA)."""
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts or len(parts) > 4:
        raise argparse.ArgumentTypeError(f"give 1 to 4 comma-separated length penalties, not {text[:40]!r}")
    try:
        for p in parts:
            Penalty.parse(p)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return parts


def build_parser():
    parser = study_parser("python -m explorer search", __doc__)
    setting(parser, SearchSettings, "beams", "comma-separated beam sizes", type=beam_list)
    setting(parser, SearchSettings, "sentences", "the first N held-out pairs", ranges=RANGES)
    setting(parser, SearchSettings, "penalties", "comma-separated: none, average, gnmt (alpha 0.6) or gnmt:ALPHA",
            flag="--length-penalties", type=penalty_list)
    switch(parser, SearchSettings, "exact", "exact search on each sentence: search errors per beam")
    setting(parser, SearchSettings, "exact_sentences", "exact search on the first N sentences only (0: all)",
            ranges=RANGES)
    setting(parser, SearchSettings, "exact_nodes", "exact search budget per sentence in decoder steps", ranges=RANGES)
    setting(parser, SearchSettings, "exact_seconds", "exact search budget per sentence in seconds", ranges=RANGES)
    add_out_and_device(parser, SEARCH_OUT)
    add_checkpoint_languages(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    try:
        settings = settings_from(args, SearchSettings)
    except ValueError as err:                     # beams or penalties that do not go together
        return refuse(str(err))
    loaded = checkpoint_and_held_out(args.checkpoint, args.device, args.src_lang, args.tgt_lang)
    if loaded is None:
        return 2
    ckpt, pairs = loaded                          # under torchrun: each process its share (explorer.runtime.split)
    return finish(BEAM_CURVE, args.out, ckpt.model, ckpt.tokenizer, pairs, settings, meta=ckpt.meta, split=from_env())


if __name__ == "__main__":
    sys.exit(main())
