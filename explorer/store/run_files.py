"""The files of a run directory, shared by the trainer (writer) and jobs/app (readers).

    runs/<name>/train_config.json   the TrainConfig the run was started with
    runs/<name>/status.json         state, pid, step, total steps, last error (rewritten atomically)
    runs/<name>/metrics.jsonl       one JSON object per line: {"kind": "train"|"eval", "step": ...}
    runs/<name>/train.log           the trainer's stdout/stderr when started as a job
    runs/<name>/trainer.lock        held (flock) while a trainer runs: a second one is refused
    runs/<name>/tokenizer/          the tokenizer trained for the run (reused on resume)
    runs/<name>/checkpoints/step_000500/   checkpoints (see explorer.store.checkpoint)

Only the trainer writes; readers tolerate partial and damaged files (a torn last line of
metrics.jsonl, a missing status.json) and never raise on them.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

from explorer.store.atomic import DISK_FULL, rewrite_json_in_place
from explorer.store.atomic import write_json_atomic  # noqa: F401  (re-exported: writers import it from here)

STATUS = "status.json"
METRICS = "metrics.jsonl"
CONFIG = "train_config.json"
LOG = "train.log"
LOCK = "trainer.lock"
TOKENIZER = "tokenizer"
CHECKPOINTS = "checkpoints"


def holds_run(run_dir: Path) -> bool:
    """A trainer has run here (it left status.json or checkpoints/): a new run must not mix with it."""
    return (Path(run_dir) / STATUS).exists() or (Path(run_dir) / CHECKPOINTS).exists()


def clear_run(run_dir: Path) -> None:
    """Remove a previous run's files before starting over: checkpoints, metrics, status, config, and
    the tokenizer trained for its settings. train.log stays (the app appends every launch to it).
    Only the trainer holding the run's lock calls this."""
    run_dir = Path(run_dir)
    for name in (CHECKPOINTS, TOKENIZER):
        if (run_dir / name).is_dir():
            shutil.rmtree(run_dir / name)
    for name in (STATUS, METRICS, CONFIG):
        (run_dir / name).unlink(missing_ok=True)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def append_metrics(run_dir: Path, record: dict) -> None:
    with open(Path(run_dir) / METRICS, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def read_metrics(run_dir: Path) -> list[dict]:
    """All complete metric records; damaged lines (a kill mid-write) are skipped."""
    records = []
    try:
        lines = (Path(run_dir) / METRICS).read_text(errors="replace").splitlines()
    except OSError:
        return records
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


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


class RunLock:
    """An exclusive flock on runs/<name>/trainer.lock; the OS drops it when the process dies."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
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

    def is_held_by_other(self) -> bool:
        """True if some live process holds the lock (used by readers to tell running from dead)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Step checkpoints of a run, oldest first: the complete ones (config.json and weights present),
    and a step whose only whole copy a save killed mid-swap left renamed aside (`.step_000300.old-*`).
    That one is listed under its own name: load_checkpoint reads the aside copy, and the trainer's
    resume renames it back (explorer.store.atomic.recover)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    steps = set()
    for p in root.iterdir():
        name = p.name[1:].split(".old-")[0] if p.name.startswith(".") and ".old-" in p.name else p.name
        if name.startswith("step_") and p.is_dir() and (p / "config.json").is_file() \
                and (p / "model.safetensors").is_file():
            steps.add(root / name)
    return sorted(steps, key=lambda p: p.name)
