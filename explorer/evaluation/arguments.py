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
