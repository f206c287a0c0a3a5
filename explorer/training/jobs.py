"""Training jobs: the trainer as a separate process, found again from its run directory.

A job *is* a run directory (runs/<name>/). `launch.start()` launches `python -m explorer train` (or
torchrun with N processes) in a new session, with stdout/stderr appended to runs/<name>/train.log,
so the job outlives a page switch, a closed tab and an app restart. Everything else reads what the
trainer writes: status.json says what it last reported, the flock on trainer.lock says whether a
trainer is alive right now. From the two:

    lock held                                   -> running   (starting: no fresh status yet)
    status finished / failed / stopped          -> that state
    status "running" but no live trainer        -> stopped   (killed, e.g. kill -9): resumable
    no readable status.json                     -> unknown   (damaged or never started)

A trainer whose run folder was deleted under it holds the lock file deleted with it: RunLock still counts
it as holding the run (the live trainer status.json names), so it is running, not killed and resumable.

Besides train.log the app writes nothing into a run directory; uploads go to runs/uploads/.
A run name from a form is one folder directly under the runs directory (`run_dir_for`): never a
path, never a symlink, so a job cannot write anywhere else. This module finds and reads jobs;
explorer.training.launch starts, resumes and stops them.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from explorer.files import names
from explorer.files.atomic import DISK_FULL
from explorer.files.user_files import tail_of_file
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.run_clearing import TOP_FILES, TOP_FOLDERS

FINAL = ("finished", "failed", "stopped")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")       # used with fullmatch: one path component
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
RESERVED_NAMES = names.RUNS_STORES     # the runs directory's folders that are not runs: no run takes their names
LAUNCHED: dict[str, subprocess.Popen] = {}     # trainers this process launched (launch.py), reaped when polled
LAUNCH_MARK = " launched: "                    # in train.log, before the command of each trainer launched
LAUNCH_TAIL_BYTES = 256 * 1024                 # how much of train.log's end launched_dataset reads


class JobError(Exception):
    """A job that cannot be started, stopped or resumed; the message says why, for the user."""


def unwritable(err: OSError) -> str:
    """Why the server could not write a file (an upload, a run's train.log), in words for the user: a full disk
    and a file-size limit said as such, anything else by the system's reason."""
    if err.errno in DISK_FULL:
        return "the server's disk is full"
    if err.errno == errno.EFBIG:
        return "the file is larger than the server may write (its file-size limit)"
    return err.strerror or str(err)


@dataclass
class Job:
    name: str
    run_dir: Path
    state: str                      # starting | running | finished | failed | stopped | unknown
    pid: int | None = None
    step: int = 0
    total_steps: int | None = None
    epoch: float | None = None
    last_error: str | None = None
    started: float | None = None
    updated: float | None = None
    config: dict = field(default_factory=dict)
    checkpoints: list[Path] = field(default_factory=list)
    note: str = ""                  # why the state was inferred ("the trainer process is gone ...")

    active = property(lambda self: self.state in ("starting", "running"))
    fraction = property(lambda self: min(1.0, max(0.0, self.step / self.total_steps)) if self.total_steps else 0.0)

    @property
    def resumable(self) -> bool:
        """A dead run with a checkpoint to continue from (and its train_config.json)."""
        return self.state in ("stopped", "failed", "unknown") and bool(self.checkpoints) and bool(self.config)


# ---- where runs live -------------------------------------------------------------------------
def run_dir_for(name: str) -> Path:
    """The run directory a run name from a form stands for: a folder directly under rp.runs_root().

    Refused (JobError naming the rule) when the name is not one plain path component ('..', '/',
    an absolute path, '.', a hidden name), is one of the app's own folders (RESERVED_NAMES: said so), or
    already exists as a symlink or anything else that resolves outside the runs directory: the trainer
    would write there.
    Creates nothing.
    """
    name, root = str(name).strip(), rp.runs_root()
    refused = JobError(f"run name {name!r}: use {NAME_RULE} (a folder directly under {root}, not a path)")
    if name in RESERVED_NAMES:
        raise JobError(f"run name {name!r} is a folder the app uses for {RESERVED_NAMES[name]}; choose another name")
    if not NAME_RE.fullmatch(name):
        raise refused
    path = root / name
    if path.is_symlink() or path.resolve().parent != root:
        raise refused
    return path


def own_run_dir(run_dir: str | os.PathLike) -> Path:
    """`run_dir` as an absolute path, if it is a run directory run_dir_for() accepts; else JobError."""
    path = Path(os.path.abspath(run_dir))                       # normalised, symlinks not followed
    given = os.fspath(run_dir)
    if (os.path.normpath(given) != given.rstrip(os.sep) or path.parent.resolve() != rp.runs_root()
            or Path(given).name != path.name):                  # "x/../y", "./y", "y/." are paths, not names
        raise JobError(f"run name {str(run_dir)!r}: use {NAME_RULE} (a folder directly under {rp.runs_root()}, "
                       "not a path)")
    return run_dir_for(path.name)


# ---- reading jobs -------------------------------------------------------------------------------
def lock_held(run_dir: Path) -> bool:
    try:
        return rf.RunLock(run_dir).is_held_by_other()
    except OSError:
        return False


LATEST_TIME = 32_503_680_000.0         # the year 3000, in seconds: later is no time a trainer wrote
# status.json's fields as a page uses them, each with what a trainer can have written: a value past it (a
# negative step, a start time of 1e300 that time.localtime cannot convert) is a damaged file's, left unknown.
STATUS_FIELDS = {
    "pid": (int, lambda v: v > 0), "step": (int, lambda v: v >= 0), "total_steps": (int, lambda v: v >= 1),
    "epoch": (float, lambda v: 0 <= v < float("inf")), "started": (float, lambda v: 0 <= v <= LATEST_TIME),
    "updated": (float, lambda v: 0 <= v <= LATEST_TIME), "last_error": (str, lambda v: True)}


def poll(run_dir: str | os.PathLike) -> Job:
    """The job in `run_dir` as it is now (never raises on damaged files)."""
    run_dir = Path(run_dir).resolve()
    status = rf.read_status(run_dir)
    job = Job(name=run_dir.name, run_dir=run_dir, state=str(status.get("state") or "unknown"),
              config=rf.read_train_config(run_dir), checkpoints=rp.checkpoint_dirs(run_dir))
    for key, (cast, fits) in STATUS_FIELDS.items():
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            value = cast(status[key]) if status.get(key) is not None else None
            if value is not None and fits(value):               # else the field is left unknown
                setattr(job, key, value)
    proc = LAUNCHED.get(str(run_dir))
    rc = proc.poll() if proc is not None else None
    if lock_held(run_dir):
        pid = rf.RunLock(run_dir).holder_pid()
        fresh = job.state == "running" and (pid is None or job.pid == pid)
        job.state, job.pid = ("running" if fresh else "starting"), pid or job.pid
    elif proc is not None and rc is None:
        job.state, job.pid = "starting", proc.pid          # launched, not yet holding the lock
    elif job.state not in FINAL:
        exited = proc is not None and rc is not None
        if exited and rc > 0:
            job.state = "failed"
            job.last_error = job.last_error or _last_error_line(run_dir) or f"the trainer exited with code {rc}"
        elif job.state == "running" or exited:
            job.state = "stopped"
            job.note = "the trainer process is gone without a final status (killed?)"
        else:
            job.state = "unknown"
            job.note = ("status.json is missing or unreadable" if not status
                        else f"status.json has an unexpected state {status.get('state')!r}")
    if proc is not None and rc is not None:
        LAUNCHED.pop(str(run_dir), None)
    return job


def list_jobs(root: str | os.PathLike | None = None) -> list[Job]:
    """Every run directory under `root`, newest first (the app's own folders, RESERVED_NAMES, and hidden ones skipped)."""
    root = Path(root) if root else rp.runs_root()
    try:
        dirs = [p for p in root.iterdir()
                if p.is_dir() and not p.name.startswith(".") and p.name not in RESERVED_NAMES and _a_run(p)]
    except OSError:
        return []
    jobs = [poll(d) for d in dirs]
    return sorted(jobs, key=lambda j: (j.started or 0, j.name), reverse=True)


def _a_run(folder: Path) -> bool:
    """`folder` holds a trainer's run, or one being launched: any file a trainer or its launch writes at a
    run's top. The analyses' folders (features/, grounding/, graphs/...) and the poisoned-pairs
    demonstration's (its runs lie one level down) hold none, and are no run with an unknown state."""
    return str(folder.resolve()) in LAUNCHED or any((folder / name).exists() for name in TOP_FILES + TOP_FOLDERS)


def _last_error_line(run_dir: Path) -> str:
    tail = rf.log_tail(run_dir, lines=40).splitlines()
    for line in reversed(tail):
        if re.match(r"^(error|failed|refused|[A-Za-z_.]*(Error|Exception))\b", line.strip()):
            return line.strip()
    return tail[-1].strip() if tail else ""


# ---- what a run trains on --------------------------------------------------------------------------
def launch_line(argv: list[str]) -> str:
    """The line launch writes into train.log before each trainer it starts: when, and the command, quoted
    (shlex) so that launched_dataset reads its --dataset back whatever the path holds."""
    return f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')}{LAUNCH_MARK}{shlex.join(argv[1:])}\n"


def launched_dataset(run_dir: Path) -> str | None:
    """The --dataset of the trainer last launched into `run_dir`, from its launch line (launch_line) in the end
    of train.log; None when there is none or it cannot be read."""
    try:
        tail = tail_of_file(Path(run_dir) / rp.LOG, LAUNCH_TAIL_BYTES, inside=run_dir).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    lines = [line for line in tail.splitlines() if line.startswith("# ") and LAUNCH_MARK in line]
    try:
        argv = shlex.split(lines[-1].split(LAUNCH_MARK, 1)[1]) if lines else []
    except ValueError:
        return None
    return next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--dataset"), None)


def trains_on(job: Job) -> str | None:
    """The dataset `job` trains on: its train_config.json's, which the trainer writes at the end of its setup;
    before that, while the trainer launched into it sets up (seconds to minutes) or is about to, the one its
    launch line names. None when neither says (a run that failed before writing its config needs none)."""
    if "dataset" in job.config:
        return str(job.config["dataset"])
    return launched_dataset(job.run_dir) if job.state not in FINAL else None


def wait(run_dir: str | os.PathLike, until=lambda job: not job.active, timeout: float = 60.0) -> Job:
    """Poll until `until(job)` holds or `timeout` seconds pass (scripts and tests)."""
    deadline, job = time.time() + timeout, poll(run_dir)
    while not until(job) and time.time() < deadline:
        time.sleep(0.25)
        job = poll(run_dir)
    return job
