"""`python -m explorer grounding CHECKPOINT --input FILE --out FILE.json`: grounded or guessing, for each
sentence of a file: its translation and the verdict the Translate page shows.

FILE: one source sentence per line, or a TSV whose header names a `source` (or `src`) column. Writes
`{"checkpoint", "weights_sha256", "index": {...}, "sentences": [{"source", "output", "guessing", "score",
"threshold", "other_language", "summary", "words": [{"word", "count", "seen"}]}]}` atomically. Every
argument is checked before the checkpoint is loaded (the input read through the bounded reader, at most
MAX_SENTENCES lines; an --out that can be written).
"""
from __future__ import annotations

import sys

from explorer.data.files import DEFAULT_MAX_BYTES
from explorer.evaluation.arguments import CommandParser, count, device, parse_checked
from explorer.files.names import GROUNDING_OUT
from explorer.files.user_files import UserFileError, read_user_file

MAX_SENTENCES = 10_000


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer grounding", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--input", required=True, help="one sentence per line, or a TSV with a 'source' column")
    parser.add_argument("--beam", type=count("beam", 1, 10), default=5, help="beam size (default 5, as the app)")
    parser.add_argument("--out", default=GROUNDING_OUT, help=f"the JSON file to write (default {GROUNDING_OUT})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    return parser


def read_sources(path: str) -> list[str]:
    """The sentences of FILE (see the module docstring); ValueError naming what is wrong."""
    try:
        text = read_user_file(path, DEFAULT_MAX_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    header = [c.strip().lower() for c in lines[0].split("\t")] if lines else []
    column = next((header.index(n) for n in ("source", "src") if n in header), None)
    if column is not None:
        lines = [row.split("\t")[column] if len(row.split("\t")) > column else "" for row in lines[1:]]
    sources = [line.strip() for line in lines if line.strip()]
    if not sources:
        raise ValueError(f"{path}: no sentences")
    if len(sources) > MAX_SENTENCES:
        raise ValueError(f"{path}: {len(sources):,} sentences, more than the {MAX_SENTENCES:,} allowed")
    return sources


def main(argv: list[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    if args is None:
        return 2
    try:
        sources = read_sources(args.input)
    except (UserFileError, ValueError) as err:
        print(f"error: --input {err}", file=sys.stderr)
        return 2

    from explorer.files.atomic import write_json_atomic
    from explorer.grounding.build import NoTrainingData, ensure
    from explorer.grounding.verdict import verdict
    from explorer.decoding.translate import DecodeConfig, translate
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    try:
        ckpt = load_checkpoint(args.checkpoint, args.device)
        index = ensure(ckpt.path, ckpt.meta)
    except (CheckpointError, NoTrainingData, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cfg = DecodeConfig(beam_size=args.beam)
    rows = []
    for source in sources:
        output = translate(ckpt.model, ckpt.tokenizer, source, cfg).text
        rows.append({"output": output, **verdict(index, source, ckpt.name).to_json()})
    write_json_atomic(args.out, {"checkpoint": ckpt.name, "weights_sha256": ckpt.meta.get("weights_sha256"),
                                 "index": {"dataset": index.dataset, "pairs": index.pairs,
                                           "threshold": index.threshold, "calibration": index.calibration},
                                 "sentences": rows})
    guesses = sum(bool(r["guessing"]) for r in rows)
    print(f"{guesses} of {len(rows)} sentences called guesses (threshold {index.threshold}); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
