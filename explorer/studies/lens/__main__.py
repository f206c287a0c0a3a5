"""`python -m explorer lens CHECKPOINT --out FILE.json`: the DecoderLens and the logit lens over a
checkpoint's held-out test pairs.

Writes the JSON atomically (explorer.studies.lens.job): `decoder_lens`, one entry per encoder depth
(embeddings first, the last layer last) with `bleu`, `chrf` and `translations`; `logit_lens`, one
entry per decoder layer with `top1_agreement`. Every argument is checked before the checkpoint is
loaded (counts within explorer.studies.lens.job.RANGES, a device this machine has, an --out that can be
written), so a slip is refused at once in one line.
"""
from __future__ import annotations

import sys

from explorer.files.names import LENS_OUT
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, checkpoint_and_held_out, \
    finish, parse_checked, setting, settings_from, study_parser
from explorer.studies.common.sentences import FORCED
from explorer.studies.lens.job import LENSES, RANGES, LensSettings


def build_parser():
    parser = study_parser("python -m explorer lens", __doc__)
    setting(parser, LensSettings, "sentences", "the first N held-out pairs", ranges=RANGES)
    setting(parser, LensSettings, "beam", "beam size of the DecoderLens translations (1: greedy)", ranges=RANGES)
    setting(parser, LensSettings, "forced", "the logit lens reads the model's own greedy output or the reference",
            choices=FORCED)
    add_out_and_device(parser, LENS_OUT)
    add_checkpoint_languages(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    loaded = checkpoint_and_held_out(args.checkpoint, args.device, args.src_lang, args.tgt_lang)
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    return finish(LENSES, args.out, ckpt.model, ckpt.tokenizer, pairs, settings_from(args, LensSettings),
                  meta=ckpt.meta)


if __name__ == "__main__":
    sys.exit(main())
