"""A study's result file, written once for every analysis: run, then written whole or not at all by the
main process; read back with its keys checked, or None (a missing or damaged file is computed again,
never shown half).

A Study names what the command line and the app need of an analysis: its run function (model,
tokenizer, items, settings, context -> plain JSON-ready data), the keys a whole result has, the report
the command prints and its progress stages. The result opens with `settings`, the checkpoint's name and
weights hash first (RunContext.checkpoint), so a file says what it measured.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from explorer.files.atomic import read_json_object, write_result_atomic
from explorer.studies.common.context import RunContext


@dataclass(frozen=True)
class Study:
    name: str                                        # what the command line and the logs call it
    run: Callable[..., dict]                         # run(*inputs, context=RunContext, **more) -> the result
    result_keys: tuple[str, ...]                     # what a whole result holds (checked as it is read)
    report: Callable[[dict], str]                    # the lines the command prints
    stages: tuple[str, ...] = ()                     # the progress stages, in order (the app lists them)

    def to_file(self, out: str | os.PathLike, *inputs, context: RunContext = RunContext(), **more) -> dict:
        """run(*inputs, context=context, **more), then the result written atomically to `out` by the main
        process: nothing is written when it is cancelled or fails."""
        result = self.run(*inputs, context=context, **more)
        if context.split.is_main:
            write_result_atomic(Path(out), result)
        return result

    def read(self, path: str | os.PathLike) -> dict | None:
        """The result as to_file wrote it, or None when missing, damaged or not this study's."""
        return read_json_object(Path(path), self.result_keys)
