"""`python -m explorer lens CHECKPOINT --out FILE.json`: the DecoderLens and the logit lens over a
checkpoint's held-out test pairs.

Writes the JSON atomically (explorer.lens.job): `decoder_lens`, one entry per encoder depth
(embeddings first, the last layer last) with `bleu`, `chrf` and `translations`; `logit_lens`, one
entry per decoder layer with `top1_agreement`. Every argument is checked before the checkpoint is
loaded (counts within explorer.lens.job.RANGES, a device this machine has, an --out that can be
written), so a slip is refused at once in one line.
"""
from __future__ import annotations

import sys
from functools import partial

from explorer.files.names import LENS_OUT
from explorer.evaluation.arguments import CommandParser, checkpoint_and_held_out, count, device, parse_checked
from explorer.heads.sentences import FORCED
from explorer.lens.job import RANGES


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer lens", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--sentences", type=count("sentences", *RANGES["sentences"]), default=200,
                        help="the first N held-out pairs (default 200, at most %d)" % RANGES["sentences"][1])
    parser.add_argument("--beam", type=count("beam", *RANGES["beam"]), default=1,
                        help="beam size of the DecoderLens translations (default 1: greedy; at most %d)"
                             % RANGES["beam"][1])
    parser.add_argument("--forced", choices=FORCED, default="output",
                        help="the logit lens reads the model's own greedy output (default) or the reference")
    parser.add_argument("--out", default=LENS_OUT, help=f"the JSON file to write (default {LENS_OUT})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2

    from explorer.lens.job import report, run_to_file
    from explorer.runtime.progress import run_command

    loaded = checkpoint_and_held_out(args.checkpoint, args.device)
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    return run_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, pairs, args.out, sentences=args.sentences,
                               beam=args.beam, forced=args.forced, meta=ckpt.meta), report, args.out)


if __name__ == "__main__":
    sys.exit(main())
