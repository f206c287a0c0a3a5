"""Waiting for work that runs elsewhere (a thread, an app's background job, a subprocess) with no
wall-clock verdict.

A busy machine or a slower processor stretches every wait, so a deadline in seconds fails a correct
program. A test here waits on the work's own signals instead: it is done when its completion signal
holds, and it is stuck only when its progress signal (a step, a stage, bytes of output, a file's size)
has not moved for STALL_S. That window is the only clock, set minutes past any single step's expected
time on a loaded machine: it turns a hang into a failure that says it was a hang, instead of a suite
that never ends. Where the work gives no progress signal, the whole wait gets STALL_S.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

# Minutes past the seconds any step takes idle; $EXPLORER_TEST_STALL_S may raise it (never needed to pass).
STALL_S = float(os.environ.get("EXPLORER_TEST_STALL_S", 900))
PROGRESS_EVERY_S = 1.0


class Stalled(AssertionError):
    """The work showed no progress for the stall window: a hang guard fired, not a timing goal missed."""


def _stalled(what: str, stall: float, detail: str = "") -> Stalled:
    return Stalled(f"gave up waiting for {what}: no progress for {stall:g} s (a hang guard, not a timing "
                   f"goal; $EXPLORER_TEST_STALL_S sets the window){detail}")


def wait_until(done: Callable[[], object], what: str, progress: Callable[[], object] = lambda: None,
               stall: float = STALL_S, poll: float = 0.05, check: Callable[[], None] | None = None,
               look_every: float = PROGRESS_EVERY_S):
    """Return done()'s first truthy value. A change in progress() (any comparable value: a step count, a
    job's stage, a file's size; looked at every `look_every` s, as it may read files) restarts the stall
    window; `check` may raise to end the wait early (the worker died). Fails with Stalled only when
    nothing moved for `stall` seconds."""
    last = progress()
    moved = looked = time.monotonic()
    while True:
        value = done()
        if value:
            return value
        if check is not None:
            check()
        if time.monotonic() - looked >= look_every:
            now, looked = progress(), time.monotonic()
            if now != last:
                last, moved = now, looked
            elif looked - moved > stall:
                raise _stalled(what, stall)
        time.sleep(poll)


def join(thread: threading.Thread, what: str, stall: float = STALL_S) -> None:
    """Join a thread that should end on its own; a hang guard of `stall` seconds, never a timing verdict."""
    thread.join(stall)
    if thread.is_alive():
        raise _stalled(what, stall)


def wait_event(event: threading.Event, what: str, stall: float = STALL_S) -> None:
    """Wait for an event another thread will set; fails only after `stall` seconds (a hang)."""
    if not event.wait(stall):
        raise _stalled(what, stall)


def wait_for_job(job, what: str, stall: float = STALL_S):
    """Wait until an app background job (webapp.background.Job) has ended; its stage and count of work
    done are its progress. Returns the job, whatever state it ended in (the test asserts which)."""
    wait_until(job.ended.is_set, what, progress=lambda: (job.state, job.stage, job.done, job.total), stall=stall)
    return job


def _files_under(root: Path) -> list[Path]:
    """Every path under `root`, read while a process writes there: a folder that vanishes mid-walk (a
    checkpoint's temp folder renamed into place) is skipped, as os.walk skips what it cannot list."""
    if root.is_file():
        return [root]
    found = []
    for folder, dirs, files in os.walk(root):
        found.extend(Path(folder) / name for name in (*dirs, *files))
    return sorted(found)


def tree_signature(*paths: Path) -> tuple:
    """The sizes and modification times of the files under `paths`: it changes whenever one is written."""
    seen = []
    for root in paths:
        for f in _files_under(Path(root)):
            try:
                st = f.stat()
            except OSError:
                continue
            seen.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(seen)


class Watched:
    """A subprocess whose stdout and stderr are read as they come (each line is progress), with the
    files under `watch` (a run directory) as further progress: the means to wait on it without a deadline."""

    def __init__(self, cmd: list[str], watch: Iterable[Path] = (), **popen):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        self.watch = tuple(Path(p) for p in watch)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, sink), daemon=True)
                         for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)
        stream.close()

    def progress(self) -> tuple:
        return len(self.out), len(self.err), tree_signature(*self.watch)

    def tail(self, chars: int = 3000) -> str:
        return f"\n--- stdout ---\n{''.join(self.out)[-chars:]}\n--- stderr ---\n{''.join(self.err)[-chars:]}"

    def wait(self, what: str, stall: float = STALL_S) -> subprocess.CompletedProcess:
        """Wait for the process to exit; kill it and fail only if it showed no progress for `stall` s."""
        try:
            wait_until(lambda: self.proc.poll() is not None, what, progress=self.progress, stall=stall, poll=0.1)
        except Stalled as stalled:
            self.proc.kill()
            self.proc.wait()
            raise _stalled(what, stall, self.tail()) from stalled
        for reader in self._readers:
            reader.join()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "".join(self.out), "".join(self.err))


def run_watched(cmd: list[str], what: str = "the subprocess", watch: Iterable[Path] = (), stall: float = STALL_S,
                **popen) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True) with a stall guard instead of a timeout:
    output lines and writes under `watch` count as progress."""
    return Watched(cmd, watch, **popen).wait(what, stall)
