"""Argument checks for the analysis commands (`python -m explorer heads`, `explorer.studies.align`), made
while they parse, before a checkpoint is loaded or anything is computed.

Every count has a stated range (the library's RANGES beside the code that uses it), since an
unbounded count is a way to fill memory before any result (a billion pruning seeds took 3 GB);
--device must name a device this machine has (explorer.runtime.device.check_device), since torch only
finds out deep inside loading. A bad argument ends the command with one line, `error: ...`, and
exit status 2, as its other refusals do, not argparse's usage dump and SystemExit.
"""
from __future__ import annotations

import argparse
import re
from typing import Callable

from explorer.runtime.device import check_device


class ArgumentsError(ValueError):
    """A command line that cannot be used; the message says which argument and why."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise ArgumentsError (the command prints it as one line and
    returns 2) instead of printing the usage and exiting the interpreter. A value refused by `choices`
    is echoed cut to 40 characters (argparse repeats the whole value, however long)."""

    def error(self, message: str):
        message = re.sub(r"(invalid choice: .{40}).+?( \(choose from)", r"\1...\2", message, flags=re.S)
        raise ArgumentsError(f"{message} (see {self.prog} --help)")


def count(name: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high], else a one-line reason."""
    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} >= {low} and <= {high} required, not {value}")
        return value
    parse.__name__ = name
    return parse


def device(text: str) -> str:
    """An argparse type: a device this machine can run on (explorer.runtime.device.check_device)."""
    try:
        return check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def check_ranges(settings, ranges: dict[str, tuple[int, int]]) -> None:
    """ValueError naming the first field of `settings` outside its (low, high) in `ranges`: an analysis's
    settings dataclass checks itself with the same ranges its command line checks (count())."""
    for name, (low, high) in ranges.items():
        value = getattr(settings, name)
        if not low <= value <= high:
            raise ValueError(f"{name} >= {low} and <= {high} required, not {value}")


def add_languages(parser: argparse.ArgumentParser) -> None:
    """--src-lang / --tgt-lang: the language pair of a multilingual model (M2M100, NLLB), which
    with_languages binds; every command that reads a checkpoint's translations takes them."""
    parser.add_argument("--src-lang", help="a multilingual model's (M2M100, NLLB) source language, e.g. en or "
                                           "eng_Latn (default: the pair it was imported with)")
    parser.add_argument("--tgt-lang", help="a multilingual model's target language, forced as every output's "
                                           "first token")


def with_languages(tokenizer, src_lang: str | None, tgt_lang: str | None):
    """`tokenizer` bound to the language pair asked for (a multilingual one's: explorer.text.multilingual);
    ValueError in one line when a pair is asked of a model that has none, a language is unknown, or a
    multilingual model is left without a source or a target language (it names some)."""
    if src_lang or tgt_lang:
        if not hasattr(tokenizer, "with_languages"):
            raise ValueError("--src-lang / --tgt-lang choose the languages of a multilingual model (M2M100, NLLB); "
                             "this one translates one pair")
        tokenizer = tokenizer.with_languages(src_lang, tgt_lang)
    if hasattr(tokenizer, "check_pair"):
        tokenizer.check_pair()
    return tokenizer
