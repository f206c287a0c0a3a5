"""`python -m explorer grounding CHECKPOINT --input FILE --out FILE.json`: grounded or guessing, for each
sentence of a file: its translation and the verdict the Translate page shows.

FILE: one source sentence per line (no tabs), or a TSV whose header names a `source` (or `src`) column.
Writes the JSON of explorer.studies.grounding.job atomically. Every argument is checked before the
checkpoint is loaded (the input read through the bounded reader, at most MAX_SENTENCES sentences of at
most MAX_SENTENCE_CHARS characters, a longer one refused with its line number:
explorer.studies.common.source_file; an --out that can be written).

A kept encoder-state map that cannot be read (truncated, empty, a directory) is not used, and a `warning:`
line on stderr names it and says that --states builds it again: the verdict then reads the training
data's counts alone, and its numbers differ from the map's (build.kept_states_and_why).
"""
from __future__ import annotations

import sys

from explorer.files.names import GROUNDING_OUT
from explorer.files.user_files import UserFileError
from explorer.studies.common.source_file import read_sources
from explorer.studies.common.command import add_checkpoint_languages, add_out_and_device, finish, open_checkpoint, \
    parse_checked, refuse, setting, settings_from, study_parser
from explorer.studies.grounding.job import RANGES, GroundingSettings
from explorer.store.checkpoint import CheckpointError
from explorer.studies.grounding.build import NoTrainingData, ensure, ensure_states, kept_states_and_why
from explorer.studies.common.context import RunContext
from explorer.studies.grounding.job import GROUNDING


def build_parser():
    parser = study_parser("python -m explorer grounding", __doc__)
    parser.add_argument("--input", required=True,
                        help="one sentence per line (no tabs), or a TSV with a 'source' column")
    setting(parser, GroundingSettings, "beam", "beam size, as the app's", ranges=RANGES)
    parser.add_argument("--states", action="store_true",
                        help="build the checkpoint's encoder-state map first when it has none (one encoder pass "
                             "over its training sentences, kept; the shipped bible-es-en has one), so the verdict "
                             "weighs both signals; without it a map is used only when there is one, as the app does")
    add_out_and_device(parser, GROUNDING_OUT)
    add_checkpoint_languages(parser)
    return parser


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    try:
        sources = read_sources(args.input)
    except (UserFileError, ValueError) as err:
        return refuse(f"--input {err}")

    try:
        ckpt = open_checkpoint(args)
        index = ensure(ckpt.path, ckpt.meta)
        if args.states:
            state_map = ensure_states(ckpt.path, ckpt.model, ckpt.tokenizer, ckpt.meta, index,
                                      RunContext(log=_warn))
        else:
            state_map, why = kept_states_and_why(ckpt.model, ckpt.meta, index.pairs)
            if why:
                _warn(f"{why}; not used, so the verdict reads the training data's counts alone "
                      f"(--states builds it again)")
    except (CheckpointError, NoTrainingData, ValueError) as err:      # MapUnusable is a ValueError
        return refuse(str(err))
    return finish(GROUNDING, args.out, ckpt.model, ckpt.tokenizer, sources, settings_from(args, GroundingSettings),
                  meta=ckpt.meta, index=index, name=ckpt.name, state_map=state_map)


if __name__ == "__main__":
    sys.exit(main())
