"""`python -m explorer search CHECKPOINT [--beams 1,2,4,8,16,32] [--sentences N] [--exact] --out FILE.json`
(also `python -m explorer search ...`): the beam-size curve over a checkpoint's held-out pairs and, with
--exact, exact search (Stahlberg & Byrne 2019) for the search-error rate per beam size.

Writes the JSON atomically (explorer.contrastive.job): `beam_curve`, one entry per length penalty and beam
size with beam, bleu, chrf, length_ratio, mean_score and search_errors (where known); `exact`, one entry
per sentence with proven, score and each beam size's score. Every argument is checked before the
checkpoint is loaded (sizes and counts within explorer.contrastive.job.RANGES, a device this machine has,
an --out that can be written), so a slip is refused at once in one line.
"""
from __future__ import annotations

import argparse
import sys
from functools import partial

from explorer.contrastive.curve import BEAMS
from explorer.contrastive.job import RANGES, SearchSettings
from explorer.evaluation.arguments import CommandParser, checkpoint_and_held_out, count, device, parse_checked
from explorer.files.names import SEARCH_OUT


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
    from explorer.contrastive.curve import Penalty

    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts or len(parts) > 4:
        raise argparse.ArgumentTypeError(f"give 1 to 4 comma-separated length penalties, not {text[:40]!r}")
    try:
        for p in parts:
            Penalty.parse(p)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return parts


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer search", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--beams", type=beam_list, default=BEAMS,
                        help="comma-separated beam sizes (default %s)" % ",".join(map(str, BEAMS)))
    parser.add_argument("--sentences", type=count("sentences", *RANGES["sentences"]), default=200,
                        help="the first N held-out pairs (default 200, at most %d)" % RANGES["sentences"][1])
    parser.add_argument("--length-penalties", type=penalty_list, default=("none", "gnmt:0.6"),
                        help="comma-separated: none, average, gnmt (alpha 0.6) or gnmt:ALPHA (default none,gnmt:0.6)")
    parser.add_argument("--exact", action="store_true", help="exact search on each sentence: search errors per beam")
    parser.add_argument("--exact-sentences", type=count("exact-sentences", *RANGES["exact_sentences"]), default=0,
                        help="exact search on the first N sentences only (default 0: all)")
    parser.add_argument("--exact-nodes", type=count("exact-nodes", *RANGES["exact_nodes"]), default=20_000,
                        help="exact search budget per sentence in decoder steps (default 20000)")
    parser.add_argument("--exact-seconds", type=count("exact-seconds", *RANGES["exact_seconds"]), default=20,
                        help="exact search budget per sentence in seconds (default 20)")
    parser.add_argument("--out", default=SEARCH_OUT, help=f"the JSON file to write (default {SEARCH_OUT})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    from explorer.contrastive.job import report, run_to_file
    from explorer.runtime.split import from_env
    from explorer.runtime.workers import run_split_command

    try:
        settings = SearchSettings(beams=args.beams, sentences=args.sentences, penalties=args.length_penalties,
                                  exact=args.exact, exact_sentences=args.exact_sentences,
                                  exact_nodes=args.exact_nodes, exact_seconds=args.exact_seconds)
    except ValueError as err:                     # beams or penalties that do not go together
        print(f"error: {err}", file=sys.stderr)
        return 2
    loaded = checkpoint_and_held_out(args.checkpoint, args.device)
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    split = from_env()                            # under torchrun: each process its share (explorer.runtime.split)
    return run_split_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, pairs, settings, args.out,
                                     meta=ckpt.meta, split=split), report, args.out, split)


if __name__ == "__main__":
    sys.exit(main())
