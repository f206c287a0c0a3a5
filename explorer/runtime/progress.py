"""Progress and cancellation for the long analyses over a test set (the head lab, the alignment
scorecard): one protocol, so the CLI prints it and the app's background jobs show and stop it alike.

A job reports (stage, done, total) through a `Progress` callback; the callback returning False, or a
threading.Event being set, cancels it: the job raises `Cancelled` at its next check and writes nothing.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable

Progress = Callable[[str, int, int], "bool | None"]     # (stage, done, total) -> False to cancel


class Cancelled(Exception):
    """A job was asked to stop (its progress callback returned False or its event was set)."""


class Ticker:
    """Per-stage tick functions: tick(done) -> False once the job should stop."""

    def __init__(self, progress: Progress | None, cancel: threading.Event | None):
        self.progress, self.cancel = progress, cancel

    def stage(self, name: str, total: int) -> Callable[[int], bool]:
        """The tick of a stage of `total` steps; raises Cancelled at once if already cancelled."""
        def tick(done: int) -> bool:
            if self.cancel is not None and self.cancel.is_set():
                return False
            return self.progress is None or self.progress(name, done, total) is not False
        if not tick(0):
            raise Cancelled()
        return tick

    def check(self, tick: Callable[[int], bool], done: int) -> None:
        """tick(done), raising Cancelled when it says stop."""
        if not tick(done):
            raise Cancelled()


def printer(every: float = 10.0) -> Progress:
    """A Progress for command lines: `  stage: done/total` on stderr, at most every `every` seconds
    and at the end of each stage."""
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        if time.time() - last[0] > every or done == total:
            last[0] = time.time()
            print(f"  {stage}: {done}/{total}", file=sys.stderr, flush=True)
    return progress
