"""Training jobs: the trainer as a separate process, found again from its run directory.

A job *is* a run directory (runs/<name>/). `start()` launches `python -m explorer.train` (or
torchrun with N processes) in a new session, with stdout/stderr appended to runs/<name>/train.log,
so the job outlives a page switch, a closed tab and an app restart. Everything else reads what the
trainer writes: status.json says what it last reported, the flock on trainer.lock says whether a
trainer is alive right now. From the two:

    lock held                                   -> running   (starting: no fresh status yet)
    status finished / failed / stopped          -> that state
    status "running" but no live trainer        -> stopped   (killed, e.g. kill -9): resumable
    no readable status.json                     -> unknown   (damaged or never started)

Besides train.log the app writes nothing into a run directory; uploads go to runs/uploads/.
A run name from a form is one folder directly under the runs directory (`run_dir_for`): never a
path, never a symlink, so a job cannot write anywhere else. Launches are serialised across app
processes by a flock on runs/.launch.lock, held until the new trainer holds its own lock, so two
servers starting jobs at the same moment cannot both pass the job limit.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from explorer.config import TrainConfig
from explorer.files.names import LAUNCH_LOCK
from explorer.runtime.priority import lower_priority
from explorer.store import run_files as rf
from explorer.store import run_paths as rp

FINAL = ("finished", "failed", "stopped")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")       # used with fullmatch: one path component
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
RESERVED_NAMES = (rp.UPLOADS, rp.HEADS, rp.ALIGN)                       # folders of the runs directory that are not runs
LAUNCH_WAIT = 60.0                         # seconds a launch waits for the new trainer to take its lock
_PROCS: dict[str, subprocess.Popen] = {}      # jobs this process launched (reaped when polled)
_LAUNCH = threading.Lock()                     # one launch at a time per app process


class JobError(Exception):
    """A job that cannot be started, stopped or resumed; the message says why, for the user."""


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
    fraction = property(lambda self: min(1.0, self.step / self.total_steps) if self.total_steps else 0.0)

    @property
    def resumable(self) -> bool:
        """A dead run with a checkpoint to continue from (and its train_config.json)."""
        return self.state in ("stopped", "failed", "unknown") and bool(self.checkpoints) and bool(self.config)


# ---- where runs live, limits -------------------------------------------------------------------
def run_dir_for(name: str) -> Path:
    """The run directory a run name from a form stands for: a folder directly under rp.runs_root().

    Refused (JobError naming the rule) when the name is not one plain path component ('..', '/',
    an absolute path, '.', a hidden name), is reserved (uploads/), or already exists as a symlink
    or anything else that resolves outside the runs directory: the trainer would write there.
    Creates nothing.
    """
    name, root = str(name).strip(), rp.runs_root()
    refused = JobError(f"run name {name!r}: use {NAME_RULE} (a folder directly under {root}, not a path)")
    if not NAME_RE.fullmatch(name) or name in RESERVED_NAMES:
        raise refused
    path = root / name
    if path.is_symlink() or path.resolve().parent != root:
        raise refused
    return path


def _own_run_dir(run_dir: str | os.PathLike) -> Path:
    """`run_dir` as an absolute path, if it is a run directory run_dir_for() accepts; else JobError."""
    path = Path(os.path.abspath(run_dir))                       # normalised, symlinks not followed
    given = os.fspath(run_dir)
    if (os.path.normpath(given) != given.rstrip(os.sep) or path.parent.resolve() != rp.runs_root()
            or Path(given).name != path.name):                  # "x/../y", "./y", "y/." are paths, not names
        raise JobError(f"run name {str(run_dir)!r}: use {NAME_RULE} (a folder directly under {rp.runs_root()}, "
                       "not a path)")
    return run_dir_for(path.name)


def gpu_count() -> int:
    import torch
    return torch.cuda.device_count()


def max_jobs() -> int:
    """EXPLORER_MAX_JOBS, else 1 on CPU and one per GPU."""
    value = os.environ.get("EXPLORER_MAX_JOBS", "")
    return max(1, int(value)) if value.strip().isdigit() else max(1, gpu_count())


# ---- reading jobs -------------------------------------------------------------------------------
def _lock_held(run_dir: Path) -> bool:
    try:
        return rf.RunLock(run_dir).is_held_by_other()
    except OSError:
        return False


def poll(run_dir: str | os.PathLike) -> Job:
    """The job in `run_dir` as it is now (never raises on damaged files)."""
    run_dir = Path(run_dir).resolve()
    status = rf.read_status(run_dir)
    job = Job(name=run_dir.name, run_dir=run_dir, state=str(status.get("state") or "unknown"),
              config=rf.read_train_config(run_dir), checkpoints=rp.checkpoint_dirs(run_dir))
    for key, cast in (("pid", int), ("step", int), ("total_steps", int), ("epoch", float),
                      ("started", float), ("updated", float), ("last_error", str)):
        with contextlib.suppress(TypeError, ValueError):
            setattr(job, key, cast(status[key]) if status.get(key) is not None else getattr(job, key))
    proc = _PROCS.get(str(run_dir))
    rc = proc.poll() if proc is not None else None
    if _lock_held(run_dir):
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
        _PROCS.pop(str(run_dir), None)
    return job


def list_jobs(root: str | os.PathLike | None = None) -> list[Job]:
    """Every run directory under `root`, newest first (uploads/, heads/ and hidden folders skipped)."""
    root = Path(root) if root else rp.runs_root()
    try:
        dirs = [p for p in root.iterdir()
                if p.is_dir() and not p.name.startswith(".") and p.name not in RESERVED_NAMES]
    except OSError:
        return []
    jobs = [poll(d) for d in dirs]
    return sorted(jobs, key=lambda j: (j.started or 0, j.name), reverse=True)


def _last_error_line(run_dir: Path) -> str:
    tail = rf.log_tail(run_dir, lines=40).splitlines()
    for line in reversed(tail):
        if re.match(r"^(error|failed|refused|[A-Za-z_.]*(Error|Exception))\b", line.strip()):
            return line.strip()
    return tail[-1].strip() if tail else ""


# ---- checks before launch -----------------------------------------------------------------------
def needed_bytes(cfg: TrainConfig) -> int:
    """Disk space the run needs (rp.disk_needed): its kept checkpoints, the best one kept beside them,
    and the one being written."""
    from explorer.model import parameter_count
    from explorer.training.args import planned_model_config

    return rp.disk_needed(parameter_count(planned_model_config(cfg)), cfg.keep_last + 2)


def validate_settings(cfg: TrainConfig, *, new_run: bool = True) -> None:
    """Everything checkable before launch; JobError names the first problem."""
    from explorer.store.checkpoint import CheckpointError, read_config
    from explorer.data import DataError
    from explorer.data.files import validate_tsv
    from explorer.training.args import validate

    try:
        validate(cfg)
    except ValueError as err:
        raise JobError(f"invalid setting: {err}") from None
    run_dir = _own_run_dir(cfg.run_dir)
    if new_run:
        _check_new(run_dir)
    if cfg.dataset not in ("numbers", "bible"):
        if not Path(cfg.dataset).is_file():
            raise JobError(f"dataset {cfg.dataset!r}: no such file (use numbers, bible or an uploaded .tsv)")
        try:
            validate_tsv(cfg.dataset)
        except DataError as err:
            raise JobError(f"dataset refused: {err}") from None
    if cfg.init_from:
        try:
            read_config(cfg.init_from)
        except CheckpointError as err:
            raise JobError(f"cannot fine-tune from this checkpoint: {err}") from None
    need, free = needed_bytes(cfg), rp.free_bytes(run_dir)
    if free < need:
        raise JobError(f"not enough disk space: {free >> 20} MiB free under {run_dir.parent}, "
                       f"the run needs about {need >> 20} MiB")


def _check_new(run_dir: Path) -> None:
    """A new run needs a name no run has used: not even a launch that failed before the trainer wrote
    anything (it left train.log, which the trainer's own holds_run check leaves alone)."""
    if rp.holds_run(run_dir) or (run_dir / rp.LOG).exists():
        raise JobError(f"a run named {run_dir.name!r} already exists; pick another name or resume it")


def _check_capacity(run_dir: Path) -> None:
    roots = {run_dir.parent, rp.runs_root()}
    running = [j for root in roots for j in list_jobs(root) if j.active]
    running += [j for j in (poll(p) for p in list(_PROCS) if Path(p).parent not in roots) if j.active]
    if any(j.run_dir == run_dir for j in running) or _lock_held(run_dir):
        raise JobError(f"a trainer is already running in {run_dir.name!r}; stop it first")
    if len(running) >= max_jobs():
        names = ", ".join(sorted(j.name for j in running))
        raise JobError(f"{len(running)} training job(s) already running ({names}); the limit is {max_jobs()} "
                       "(set EXPLORER_MAX_JOBS to change it). Stop one first.")


# ---- launching ----------------------------------------------------------------------------------
def command(cfg: TrainConfig, *, resume: bool = False, nproc: int = 1) -> list[str]:
    """The argv that runs the trainer with `cfg` (flags = TrainConfig fields)."""
    defaults, argv = TrainConfig(), []
    for f in fields(TrainConfig):
        value = getattr(cfg, f.name)
        if value is None or (value == getattr(defaults, f.name) and f.name != "run_dir"):
            continue
        flag = "--" + f.name.replace("_", "-")
        argv += ([flag] if value else ["--no-" + flag[2:]]) if isinstance(value, bool) else [flag, str(value)]
    launcher = [sys.executable, "-m", "explorer.train"]
    if nproc > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                    "-m", "explorer.train"]
    return launcher + argv + (["--resume"] if resume else [])


@contextlib.contextmanager
def _launch_slot():
    """One launch at a time, in this process (a lock) and across processes (flock on runs/.launch.lock).

    Held from the capacity check until the new trainer holds its run lock (see _launch), so a
    second app process that checks the limit meanwhile sees the new job as running.
    """
    root = rp.runs_root()
    with _LAUNCH:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LAUNCH_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + LAUNCH_WAIT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise JobError("another training job is being started right now; try again in a minute")
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)                                        # closing the descriptor drops the flock


def _launch(cfg: TrainConfig, argv: list[str], run_dir: Path) -> Job:
    """Start the trainer and wait (up to LAUNCH_WAIT s) until it holds its run lock or has exited."""
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cfg.threads:
        env["OMP_NUM_THREADS"] = str(cfg.threads)
    with open(run_dir / rp.LOG, "ab") as log:
        log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} launched: {' '.join(argv[1:])}\n".encode())
        log.flush()
        proc = subprocess.Popen(argv, cwd=rp.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    lower_priority(proc.pid)
    _PROCS[str(run_dir)] = proc
    deadline = time.monotonic() + LAUNCH_WAIT
    while proc.poll() is None and not _lock_held(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return poll(run_dir)


def start(cfg: TrainConfig, *, nproc: int = 1) -> Job:
    """Validate and launch a new run in cfg.run_dir (a folder directly under rp.runs_root()); returns the job."""
    cfg = TrainConfig.from_dict({**cfg.to_dict(), "run_dir": str(_own_run_dir(cfg.run_dir))})
    if nproc > 1 and nproc > gpu_count():
        raise JobError(f"{nproc} processes asked for, but {gpu_count()} GPU(s) are present")
    validate_settings(cfg)
    run_dir = Path(cfg.run_dir)
    with _launch_slot():
        _check_new(run_dir)                     # again inside the slot: another process may have taken the name
        _check_capacity(run_dir)
        return _launch(cfg, command(cfg, nproc=nproc), run_dir)


def resume(run_dir: str | os.PathLike, *, nproc: int = 1, **overrides) -> Job:
    """Continue a dead run from its last checkpoint (overrides, e.g. max_steps=600, win over its config)."""
    run_dir = _own_run_dir(run_dir)
    with _launch_slot():
        job = poll(run_dir)
        if job.active:
            raise JobError(f"{job.name!r} is {job.state}; nothing to resume")
        if not job.checkpoints:
            raise JobError(f"{job.name!r} has no complete checkpoint to resume from; start a new run")
        try:
            cfg = TrainConfig.from_dict({**job.config, **overrides, "run_dir": str(run_dir)})
        except (TypeError, ValueError) as err:
            raise JobError(f"{run_dir / rp.CONFIG}: cannot be used to resume ({err})") from None
        if not job.config:
            raise JobError(f"{run_dir / rp.CONFIG} is missing or unreadable; cannot resume")
        validate_settings(cfg, new_run=False)
        _check_capacity(run_dir)
        return _launch(cfg, command(cfg, resume=True, nproc=nproc), run_dir)


def stop(run_dir: str | os.PathLike) -> Job:
    """Ask the trainer to save and exit (SIGTERM); returns at once, the job becomes `stopped`."""
    run_dir = Path(run_dir).resolve()
    job = poll(run_dir)
    if not job.active or job.pid is None:
        raise JobError(f"{job.name!r} is not running ({job.state})")
    pid = job.pid
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp() and "explorer.train" in _cmdline(pgid):
            os.killpg(pgid, signal.SIGTERM)          # the trainer's own session (torchrun and its ranks)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return poll(run_dir)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait(run_dir: str | os.PathLike, until=lambda job: not job.active, timeout: float = 60.0) -> Job:
    """Poll until `until(job)` holds or `timeout` seconds pass (scripts and tests)."""
    deadline, job = time.time() + timeout, poll(run_dir)
    while not until(job) and time.time() < deadline:
        time.sleep(0.25)
        job = poll(run_dir)
    return job
