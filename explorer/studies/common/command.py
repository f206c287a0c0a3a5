"""A study's command line, written once: the parser every analysis command starts from, options made
from the analysis's settings dataclass (its defaults the only ones, said in the help), the checks made
before a checkpoint is loaded, and the command's ending.

`python -m explorer heads|align|contributions|lens|patch|search|grounding` each build_parser() from
study_parser() and setting()/switch(), turn the parsed arguments into their settings with
settings_from(), and end with finish(): the run with a printing RunContext, the report, `written: OUT`,
or one `error: ...` line and exit status 2 (a bad argument, a checkpoint that cannot be loaded, nothing
the model can read) instead of a traceback. Counts have a stated range (the analysis's RANGES), since an
unbounded count is a way to fill memory before any result.

Every study command that reads a checkpoint takes --src-lang / --tgt-lang (add_checkpoint_languages:
explorer.evaluation.arguments's, as `evaluate` has them): open_checkpoint and checkpoint_and_held_out
bind a multilingual model (M2M100, NLLB) to that pair, the tokenizer every analysis then reads (its
target tag forced on every output); a missing or unknown language, or a pair asked of a one-pair model,
is refused in one line before anything is computed.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import MISSING, fields, replace
from pathlib import Path

from explorer.evaluation.arguments import ArgumentsError, CommandParser, add_languages, count, device, with_languages
from explorer.files.user_files import UserFileError, check_output_file
from explorer.runtime.progress import printer
from explorer.runtime.split import ONE, Split, finish as leave_group
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.evaluation.scores import held_out_pairs
from explorer.store.checkpoint import CheckpointError, LoadedCheckpoint as Checkpoint, load_checkpoint
from explorer.files.places import model_folder_of
from explorer.store.output_dirs import in_app_store, in_shipped_folder


def study_parser(prog: str, doc: str) -> CommandParser:
    """`prog CHECKPOINT ...`, described by the first line of the command module's docstring."""
    parser = CommandParser(prog=prog, description=doc.split("\n")[0])
    parser.add_argument("checkpoint")
    return parser


def add_checkpoint_languages(parser: argparse.ArgumentParser) -> None:
    """--src-lang / --tgt-lang on a study command (evaluation.arguments.add_languages, as `evaluate` has
    them), read by open_checkpoint and checkpoint_and_held_out."""
    add_languages(parser)


def add_out_and_device(parser: argparse.ArgumentParser, out: str) -> None:
    parser.add_argument("--out", default=out, help=f"the JSON file to write (default {out})")
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda, cuda:N, mps or auto")


def default_of(settings_class, name: str):
    """The default of field `name` of a settings dataclass: the one place it is written."""
    for f in fields(settings_class):
        if f.name == name:
            if f.default is MISSING:
                raise ValueError(f"{settings_class.__name__}.{name} has no default")
            return f.default
    raise ValueError(f"{settings_class.__name__} has no field {name!r}")


def setting(parser: argparse.ArgumentParser, settings_class, name: str, help: str, *,
            ranges: dict[str, tuple[int, int]] | None = None, flag: str | None = None, **extra) -> None:
    """--NAME for field `name` of `settings_class`: its default the dataclass's, said at the end of the
    help; a count within ranges[name] when the ranges hold it (else `extra`'s type or choices)."""
    default = default_of(settings_class, name)
    flag = flag or "--" + name.replace("_", "-")
    shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
    said = f"default {shown}"
    if ranges is not None and name in ranges:
        low, high = ranges[name]
        extra.setdefault("type", count(flag.lstrip("-"), low, high))      # named as the user typed it
        said += f", at most {high}" if low <= 1 else f", {low} to {high}"
    parser.add_argument(flag, dest=name, default=default, help=f"{help} ({said})", **extra)


def switch(parser: argparse.ArgumentParser, settings_class, name: str, help: str, *, flag: str | None = None) -> None:
    """An on/off field as a flag that changes its default: `--per-layer` turns on a field that is off,
    `--no-eflomal` turns off one that is on."""
    on = default_of(settings_class, name)
    parser.add_argument(flag or ("--no-" if on else "--") + name.replace("_", "-"), dest=name,
                        action="store_false" if on else "store_true", help=help)


def settings_from(args: argparse.Namespace, settings_class, **more):
    """The settings the parsed arguments name: every field the parser has, the others at their default."""
    given = {f.name: getattr(args, f.name) for f in fields(settings_class) if hasattr(args, f.name)}
    return settings_class(**{**given, **more})


def parse_checked(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | None:
    """Parse `argv` and check that --out may be written (explorer.files.user_files) before a checkpoint
    is loaded; None after printing `error: ...` (the command then returns 2)."""
    args = None
    try:
        args = parser.parse_args(argv)
        keep_inputs(args, parser.get_default("out"))
        check_output_file(args.out)
    except ArgumentsError as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    except UserFileError as err:
        print(f"error: --out {err}", file=sys.stderr)
        return None
    except OSError as err:                        # a name the system refuses to look at (too long, unreadable)
        print(f"error: --out {getattr(args, 'out', '')}: {err.strerror or err}", file=sys.stderr)
        return None
    return args


def keep_inputs(args: argparse.Namespace, default_out: str | None = None) -> None:
    """UserFileError when --out would replace what a command reads: a file another argument names (grounding's
    --input, or one of contributions' --combine files, given as --out too), or anything in a model folder
    (the checkpoint's own config.json or weights, or a result mixed into a shipped model, which a run's
    pruning and the catalog take for a damaged checkpoint), the shipped checkpoints folder, or a store of the
    runs folder the app reads again or a training run's folder (output_dirs.in_app_store). Checked before
    anything is written, a probe file included. `default_out`: the --out the user did not type, said so in the message."""
    out = Path(args.out)
    folder = model_folder_of(out.parent)
    said = f"{args.out} (the default: give --out to write elsewhere)" if args.out == default_out else args.out
    if folder is not None:
        raise UserFileError(f"{said}: inside the model folder {folder}; write results outside it")
    shipped = in_shipped_folder(out.parent)
    if shipped is not None:
        raise UserFileError(f"{said}: inside the shipped checkpoints folder {shipped} (its models and their "
                            "training-data indexes); write results outside it")
    kept = in_app_store(out)
    if kept is not None:
        raise UserFileError(f"{said}: inside {kept}, which the app writes and reads again; write results "
                            "outside it")
    if not out.is_file():
        return
    for name, value in vars(args).items():
        given = value if isinstance(value, (list, tuple)) else [value]
        for one in given:
            if name != "out" and isinstance(one, str) and one and os.path.isfile(one) and os.path.samefile(one, out):
                raise UserFileError(f"{args.out}: this command reads it too (--{name.replace('_', '-')}); name "
                                    "another file to write")


def open_checkpoint(args: argparse.Namespace) -> Checkpoint:
    """args.checkpoint loaded on args.device, its tokenizer bound to --src-lang / --tgt-lang (module
    docstring); CheckpointError or ValueError (a language missing, unknown or asked of a one-pair model)."""
    return bound(load_checkpoint(args.checkpoint, device=args.device), getattr(args, "src_lang", None),
                 getattr(args, "tgt_lang", None))


def bound(ckpt: Checkpoint, src_lang: str | None = None, tgt_lang: str | None = None) -> Checkpoint:
    """`ckpt` with its tokenizer bound to the pair (evaluation.arguments.with_languages); ValueError."""
    tokenizer = with_languages(ckpt.tokenizer, src_lang, tgt_lang)
    return ckpt if tokenizer is ckpt.tokenizer else replace(ckpt, tokenizer=tokenizer)


def checkpoint_and_held_out(checkpoint: str, device_name: str, src_lang: str | None = None,
                            tgt_lang: str | None = None):
    """(the loaded checkpoint, bound to the language pair, and its held-out pairs) for a study over a
    test set, or None after one "error: ..." line (a checkpoint that cannot be loaded, a language
    missing or unknown, no held-out pairs to read)."""
    try:
        ckpt = bound(load_checkpoint(checkpoint, device=device_name), src_lang, tgt_lang)
        pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    except (CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    return ckpt, pairs


def refuse(message: str) -> int:
    """One `error: ...` line; the command's exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def finish(study: Study, out: str, *inputs, meta: dict, split: Split = ONE, **more) -> int:
    """A study command's ending: study.to_file with progress on stderr and log lines on stdout, then the
    report and `written: OUT` (main process only; torchrun's other processes compute their share
    quietly), or one `error: ...` line and 2 when it cannot be done (nothing the model can read, an --out
    that cannot be written)."""
    context = RunContext(meta=meta, progress=printer(), log=lambda line: print(line, flush=True), split=split)
    try:
        try:
            result = study.to_file(out, *inputs, context=context, **more)
        except (ValueError, OSError) as err:
            return refuse(str(err) if split.is_main else f"(process {split.rank}) {err}")
        if split.is_main:
            print(study.report(result))
            print(f"written: {out}")
        return 0
    finally:
        leave_group(split)
