"""How a study runs, beside what it computes: one object instead of five arguments threaded by hand.

Every analysis's run function takes a RunContext: the checkpoint's metadata (its name and weights hash
head the result file), where progress goes and what cancels it (explorer.runtime.progress: the command
line prints it, the app's background job shows it and its Cancel button sets the event), a sink for log
lines, and this process's share of the items (explorer.runtime.split: one process owns them all, under
torchrun each takes every world-th). Only the main process reports: the others compute quietly.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from explorer.runtime.progress import Progress, Ticker
from explorer.runtime.split import ONE, Split


def quiet(_: str) -> None:
    """A log that says nothing (the default, and every process but the main one)."""


@dataclass(frozen=True)
class RunContext:
    meta: dict = field(default_factory=dict)         # the checkpoint's metadata: name, weights_sha256, training
    progress: Progress | None = None                 # (stage, done, total) -> False to cancel
    cancel: threading.Event | None = None            # set: the run raises Cancelled at its next check
    log: Callable[[str], None] = quiet               # one line at a time (the command prints them)
    split: Split = ONE                               # which items this process computes

    def ticker(self) -> Ticker:
        """Per-stage ticks that report on the main process and cancel on every one."""
        return Ticker(self.progress if self.split.is_main else None, self.cancel)

    def say(self, line: str) -> None:
        """A log line, from the main process only."""
        if self.split.is_main:
            self.log(line)

    @property
    def stopped(self) -> Callable[[], bool] | None:
        """A check a long loop may poll between items: has Cancel been pressed (None: nothing can cancel)."""
        return self.cancel.is_set if self.cancel is not None else None

    def checkpoint(self) -> dict:
        """Which checkpoint a result came from: the first two keys of every result file's settings."""
        return {"checkpoint": self.meta.get("name", ""), "weights_sha256": self.meta.get("weights_sha256", "")}
