"""`python -m explorer convert`: from-hf (import a Marian, M2M100 or NLLB model), to-hf and to-ct2 (export a checkpoint).

Every failure the user can fix (no such directory, offline with a hub id, an option one side lacks,
a damaged file, an output inside the source) ends in one line on stderr, `error: ...` naming the file
at fault, and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
import time

from explorer.store.display_name import display_name
from explorer.store.errors import CheckpointError

DTYPES = ("float16", "float32")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m explorer convert", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("from-hf", help="import a Hugging Face Marian, M2M100 or NLLB-200 model (local directory "
                                         "or hub id)")
    imp.add_argument("source", help="a local directory (config.json, weights, and source.spm, target.spm, vocab.json "
                                    "for Marian; sentencepiece.bpe.model [+ vocab.json, tokenizer.json] for M2M100 / "
                                    "NLLB) or a hub id such as Helsinki-NLP/opus-mt-es-en (needs internet)")
    imp.add_argument("out", help="the checkpoint directory to write (e.g. models/opus-mt-es-en)")
    imp.add_argument("--dtype", choices=DTYPES, default="float16", help="weights on disk (default float16)")
    imp.add_argument("--name", type=display_name, help="the name shown in the app (default: the out directory's name)")
    imp.add_argument("--src-lang", help="source language code, when the source does not state it (M2M100 / NLLB: "
                                        "the default source language, e.g. en or eng_Latn)")
    imp.add_argument("--tgt-lang", help="target language code, when the source does not state it (M2M100 / NLLB: "
                                        "the default target language)")
    imp.add_argument("--domain", help="what text the model was trained on (shown in the model card)")
    _overwrite(imp)
    hf = sub.add_parser("to-hf", help="export a checkpoint as a Hugging Face Marian directory")
    hf.add_argument("checkpoint")
    hf.add_argument("out")
    hf.add_argument("--dtype", choices=DTYPES, default="float32")
    _overwrite(hf)
    ct2 = sub.add_parser("to-ct2", help="export a checkpoint as a CTranslate2 model (needs the ct2 extra)")
    ct2.add_argument("checkpoint")
    ct2.add_argument("out")
    ct2.add_argument("--quantization", default=None, help="e.g. int8, int8_float32, float16 (default: float32)")
    _overwrite(ct2)
    return p


def _overwrite(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--overwrite", action="store_true",
                     help="replace an earlier output of this converter even if it was edited since (never a "
                          "directory holding files the converter did not write)")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # imported after parsing: torch and the converters take seconds, and --help or a bad option should not wait
    import torch

    from explorer.interop.hf_export import export_ct2, export_marian
    from explorer.interop.hf_import import import_from_hf

    started = time.perf_counter()
    try:
        if args.command == "from-hf":
            out = import_from_hf(args.source, args.out, dtype=getattr(torch, args.dtype), name=args.name,
                                src_lang=args.src_lang, tgt_lang=args.tgt_lang, domain=args.domain,
                                overwrite=args.overwrite)
        elif args.command == "to-hf":
            out = export_marian(args.checkpoint, args.out, dtype=getattr(torch, args.dtype), overwrite=args.overwrite)
        else:
            out = export_ct2(args.checkpoint, args.out, quantization=args.quantization, overwrite=args.overwrite)
    except (ValueError, CheckpointError, OSError, RuntimeError) as exc:   # ConversionError/SourceError are ValueErrors
        print(f"error: {' '.join(str(exc).splitlines())}", file=sys.stderr)   # one line, whatever a library said
        return 2
    print(f"wrote {out} in {time.perf_counter() - started:.1f} s")
    return 0
