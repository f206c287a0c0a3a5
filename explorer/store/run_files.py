"""The files of a run directory, written by the trainer and read by jobs, evaluation, plots and the
app through the readers here (where they live and what they are called: explorer.store.run_paths).

    status.json     state, pid, step, total steps, last error (rewritten atomically)
    metrics.jsonl   one JSON object per line: {"kind": "train"|"eval", "step": ...}
    train.log       the trainer's stdout/stderr when started as a job
    trainer.lock    held (flock) while a trainer runs: a second one is refused

Only the trainer writes a run directory; readers tolerate partial and damaged files (a torn last line
of metrics.jsonl, a missing status.json) and never raise on them.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any

from explorer.files import limits
from explorer.files.atomic import DISK_FULL, replacing, rewrite_json_in_place, write_json_atomic
from explorer.files.user_files import open_regular, parse_json, read_user_json, tail_of_file
from explorer.runtime.processes import command_line, working_folder
from explorer.store.metrics import Curves, curves_from_records
from explorer.store.run_clearing import RunRefused
from explorer.store.run_paths import CONFIG, LOCK, LOG, METRICS, STATUS


def read_json(path: Path, default: Any = None) -> Any:
    """A run's small JSON file (status.json, train_config.json, the lock's pid) through the bounded
    reader (at most limits.JSON_BYTES, a regular file in the run's folder); `default` when it is
    missing, damaged or refused."""
    try:
        return read_user_json(path, limits.JSON_BYTES, inside=Path(path).parent)
    except (OSError, ValueError, RecursionError):
        return default


def read_train_config(run_dir: Path) -> dict:
    """train_config.json as a dict; {} when it is missing or damaged."""
    config = read_json(Path(run_dir) / CONFIG, {})
    return config if isinstance(config, dict) else {}


def append_metrics(run_dir: Path, record: dict) -> None:
    with open(Path(run_dir) / METRICS, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def read_metrics(run_dir: Path) -> list[dict]:
    """The complete metric records of the newest limits.METRICS_TAIL_BYTES of metrics.jsonl (all of a
    run's, short of a six-figure count of records); damaged lines (a kill mid-write, the cut of the
    tail) are skipped."""
    records = []
    try:
        data = tail_of_file(Path(run_dir) / METRICS, limits.METRICS_TAIL_BYTES, inside=run_dir)
    except (OSError, ValueError):
        return records
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            rec = parse_json(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def has_metrics(run_dir: Path) -> bool:
    """Whether the trainer has logged anything yet (metrics.jsonl exists)."""
    return (Path(run_dir) / METRICS).is_file()


def read_curves(run_dir: Path) -> Curves:
    """The run's metrics as arrays (explorer.store.metrics.Curves), what every figure and ETA reads."""
    return curves_from_records(read_metrics(run_dir))


def drop_metrics_after(run_dir: Path, step: int) -> None:
    """On resume, forget records of steps after the checkpoint: they are about to be trained again.
    Streamed line by line (the whole file, however long; the run's own), rewritten atomically."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return
    with os.fdopen(open_regular(path, inside=run_dir), "rb") as src, replacing(path, "wb") as out:
        for line in src:
            try:
                rec = parse_json(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and (not isinstance(rec.get("step"), int) or rec["step"] <= step):
                out.write((json.dumps(rec) + "\n").encode())


def log_tail(run_dir: str | os.PathLike, lines: int = 30, max_bytes: int = 64 * 1024) -> str:
    """The end of train.log; tqdm's carriage-return updates collapse to their latest state."""
    path = Path(run_dir) / LOG
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - max_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    parts = [[p for p in ln.split("\r") if p.strip()] for ln in text.split("\n")]
    return "\n".join([p[-1].rstrip() for p in parts if p][-lines:])


def write_status(run_dir: Path, **fields: Any) -> dict:
    """Merge `fields` into status.json (the trainer is the only writer).

    On a full disk the atomic write cannot make its temp file; status.json is then rewritten in
    place, so a `failed` state and its reason still reach the readers. Other errors, and a disk too
    full even for that, raise OSError.
    """
    path = Path(run_dir) / STATUS
    status = read_json(path, {}) or {}
    status.update(fields)
    try:
        write_json_atomic(path, status)
    except OSError as err:
        if err.errno not in DISK_FULL or not path.is_file():
            raise
        rewrite_json_in_place(path, status)
    return status


def read_status(run_dir: Path) -> dict:
    status = read_json(Path(run_dir) / STATUS, None)
    return status if isinstance(status, dict) else {}


# How the lock file is opened: never through a symlink, never blocking (a FIFO put there would hang an open
# for reading until a writer came), never inherited by a child process.
_LOCK_FLAGS = os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_LOCK_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class RunLock:
    """An exclusive flock on runs/<name>/trainer.lock; the OS drops it when the process dies.

    The lock file is the trainer's own regular file. Anything else at its name (a directory, a FIFO, a
    symlink: put there by hand or by another program) is refused by acquire() with a RunRefused naming
    it, which `train` prints as one `error:` line (it was an IsADirectoryError or an OSError from
    ftruncate), and is never held by a trainer for is_held_by_other().

    A run folder deleted (rm -rf) under a live trainer leaves that trainer holding its flock on the deleted
    lock file, training on and writing the folder it recreates: no flock says it is alive. It is still
    this run's trainer (live_trainer: the pid its status.json records, alive, running `train` on this
    folder), so it holds the run for is_held_by_other() and acquire(): a second trainer would write the
    same run beside it."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK
        self._fd: int | None = None
        self.refusal: str | None = None       # what _open last found at the lock's name instead of a file

    def _open(self, flags: int) -> int | None:
        """A descriptor of the lock file when it is a regular file (opened with `flags` and _LOCK_FLAGS);
        None when it is something else, with self.refusal saying what."""
        self.refusal = None
        try:
            fd = os.open(self.path, flags | _LOCK_FLAGS, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                self.refusal = "a symbolic link"
            elif err.errno == errno.EISDIR:
                self.refusal = "a directory"
            else:
                raise
            return None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            self.refusal = next((name for test, name in _LOCK_KINDS if test(mode)), "not a regular file")
            return None
        return fd

    def acquire(self) -> bool:
        """Take the lock (True), or False when another trainer holds it; RunRefused when the lock's name
        holds something other than a regular file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._open(os.O_RDWR | os.O_CREAT)
        if fd is None:
            raise RunRefused(f"{self.path} is {self.refusal}, not the lock file a trainer writes there; "
                             "remove it and start again")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        if self.live_trainer() is not None:     # it holds the lock file deleted with the folder
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder_pid(self) -> int | None:
        """The pid the holder wrote into the lock file, else that of a live trainer holding a deleted one
        (live_trainer); None when unknown."""
        pid = read_json(self.path)
        return pid if isinstance(pid, int) and not isinstance(pid, bool) else self.live_trainer()

    def is_held_by_other(self) -> bool:
        """True if some live process holds the lock (used by readers to tell running from dead), or a live
        trainer of this run holds the one deleted with its folder (live_trainer); False when there is no
        lock file, or something no trainer can hold (a directory, a FIFO: opening that for reading used to
        wait for a writer forever), and no such trainer."""
        if os.path.lexists(self.path) and (fd := self._open(os.O_RDONLY)) is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
        return self.live_trainer() is not None

    def live_trainer(self) -> int | None:
        """The pid status.json records while it says `running`, when that process is alive, is not this
        one, and runs `train` on this run folder (its command line says so): the run's trainer, whether
        or not the lock file it holds is still there. None otherwise (a trainer killed, its pid reused)."""
        status = read_status(self.path.parent)
        pid = status.get("pid")
        if status.get("state") != "running" or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return None
        return pid if pid != os.getpid() and _trains(pid, self.path.parent) else None


def _trains(pid: int, run_dir: Path) -> bool:
    """Process `pid` is alive and runs the trainer (`python -m explorer.train`, `python -m explorer train`, the
    `explorer train` script, a torchrun rank) with --run-dir naming `run_dir` (relative to its working folder)."""
    argv = command_line(pid)
    if argv is None:
        return False                                            # gone, or not ours to read
    trainer = any(arg == "explorer.train" or (arg == "train" and i and Path(argv[i - 1]).name == "explorer")
                  for i, arg in enumerate(argv))
    named = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--run-dir"]
    named += [arg.split("=", 1)[1] for arg in argv if arg.startswith("--run-dir=")]
    if not trainer or not named:
        return False
    cwd = "" if os.path.isabs(named[-1]) else working_folder(pid)
    if cwd is None:
        return False
    return Path(cwd, named[-1]).resolve() == Path(run_dir).resolve()
