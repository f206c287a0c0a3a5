"""Starting, resuming and stopping training jobs (finding and reading them: explorer.training.jobs).

`start()` launches `python -m explorer train` (or torchrun with N processes) in a new session, with
stdout/stderr appended to runs/<name>/train.log, so the job outlives a page switch, a closed tab and
an app restart. Everything checkable is checked first (settings, dataset, disk space, the job limit).
Launches are serialised across app processes by a flock on runs/.launch.lock, held until the new
trainer holds its own lock, so two servers starting jobs at the same moment cannot both pass the job
limit.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path

import torch

from explorer.config import TrainConfig
from explorer.data import DataError
from explorer.data.files import MIN_PAIRS, validate_tsv
from explorer.files.limits import whole_number
from explorer.files.names import LAUNCH_LOCK
from explorer.model import parameter_count
from explorer.runtime.priority import lower_priority
from explorer.runtime.processes import command_line
from explorer.store import run_paths as rp
from explorer.store.checkpoint import CheckpointError, read_config
from explorer.training import jobs
from explorer.training.args import planned_model_config, validate

LAUNCH_WAIT = 60.0                         # seconds a launch waits for the new trainer to take its lock
_LAUNCH = threading.Lock()                 # one launch at a time per app process


# ---- limits -------------------------------------------------------------------------------------
def gpu_count() -> int:
    return torch.cuda.device_count()


def max_jobs() -> int:
    """EXPLORER_MAX_JOBS, else 1 on CPU and one per GPU."""
    value = whole_number(os.environ.get("EXPLORER_MAX_JOBS", ""), digits=6)
    return max(1, value) if value is not None else max(1, gpu_count())


# ---- checks before launch -----------------------------------------------------------------------
def needed_bytes(cfg: TrainConfig) -> int:
    """Disk space the run needs (rp.disk_needed): its kept checkpoints, the best one kept beside them,
    and the one being written."""
    return rp.disk_needed(parameter_count(planned_model_config(cfg)), cfg.keep_last + 2)


def validate_settings(cfg: TrainConfig, *, new_run: bool = True) -> None:
    """Everything checkable before launch; jobs.JobError names the first problem."""
    try:
        validate(cfg)
    except ValueError as err:
        raise jobs.JobError(f"invalid setting: {err}") from None
    run_dir = jobs.own_run_dir(cfg.run_dir)
    if new_run:
        check_new(run_dir)
    if cfg.dataset not in ("numbers", "bible"):
        if not Path(cfg.dataset).is_file():
            raise jobs.JobError(f"dataset {cfg.dataset!r}: no such file (use numbers, bible or an uploaded .tsv)")
        try:
            validate_tsv(cfg.dataset, min_pairs=MIN_PAIRS)
        except DataError as err:
            raise jobs.JobError(f"dataset refused: {err}") from None
    if cfg.init_from:
        try:
            read_config(cfg.init_from)
        except CheckpointError as err:
            raise jobs.JobError(f"cannot fine-tune from this checkpoint: {err}") from None
    need, free = needed_bytes(cfg), rp.free_bytes(run_dir)
    if free < need:
        raise jobs.JobError(f"not enough disk space: {free >> 20} MiB free under {run_dir.parent}, "
                       f"the run needs about {need >> 20} MiB")


def check_new(run_dir: Path) -> None:
    """A new run needs a name no run has used: not even a launch that failed before the trainer wrote
    anything (it left train.log, which the trainer's own holds_run check leaves alone)."""
    if rp.holds_run(run_dir) or (run_dir / rp.LOG).exists():
        raise jobs.JobError(f"a run named {run_dir.name!r} already exists; pick another name or resume it")


def check_capacity(run_dir: Path) -> None:
    roots = {run_dir.parent, rp.runs_root()}
    running = [j for root in roots for j in jobs.list_jobs(root) if j.active]
    running += [j for j in (jobs.poll(p) for p in list(jobs.LAUNCHED) if Path(p).parent not in roots) if j.active]
    if any(j.run_dir == run_dir for j in running) or jobs.lock_held(run_dir):
        raise jobs.JobError(f"a trainer is already running in {run_dir.name!r}; stop it first")
    if len(running) >= max_jobs():
        names = ", ".join(sorted(j.name for j in running))
        raise jobs.JobError(f"{len(running)} training job(s) already running ({names}); the limit is {max_jobs()} "
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
                        raise jobs.JobError("another training job is being started right now; try again in a minute")
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)                                        # closing the descriptor drops the flock


def _launch(cfg: TrainConfig, argv: list[str], run_dir: Path) -> jobs.Job:
    """Start the trainer and wait (up to LAUNCH_WAIT s) until it holds its run lock or has exited."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cfg.threads:
        env["OMP_NUM_THREADS"] = str(cfg.threads)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / rp.LOG, "ab") as log:
            log.write(jobs.launch_line(argv).encode())     # also what the run trains on until its config is written
            log.flush()
            proc = subprocess.Popen(argv, cwd=rp.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as err:                                  # a full disk, a file-size limit: said, not a traceback
        raise jobs.JobError(f"the trainer could not be started: {run_dir / rp.LOG} cannot be written "
                            f"({jobs.unwritable(err)})") from None
    lower_priority(proc.pid)
    jobs.LAUNCHED[str(run_dir)] = proc
    deadline = time.monotonic() + LAUNCH_WAIT
    while proc.poll() is None and not jobs.lock_held(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return jobs.poll(run_dir)


def start(cfg: TrainConfig, *, nproc: int = 1) -> jobs.Job:
    """Validate and launch a new run in cfg.run_dir (a folder directly under rp.runs_root()); returns the job."""
    try:                                       # its types and numbers checked: one JobError, as validate's
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "run_dir": str(jobs.own_run_dir(cfg.run_dir))})
    except ValueError as err:
        raise jobs.JobError(f"invalid setting: {err}") from None
    if nproc > 1 and nproc > gpu_count():
        raise jobs.JobError(f"{nproc} processes asked for, but {gpu_count()} GPU(s) are present")
    validate_settings(cfg)
    run_dir = Path(cfg.run_dir)
    with _launch_slot():
        check_new(run_dir)                     # again inside the slot: another process may have taken the name
        check_capacity(run_dir)
        return _launch(cfg, command(cfg, nproc=nproc), run_dir)


def resume(run_dir: str | os.PathLike, *, nproc: int = 1, **overrides) -> jobs.Job:
    """Continue a dead run from its last checkpoint (overrides, e.g. max_steps=600, win over its config)."""
    run_dir = jobs.own_run_dir(run_dir)
    with _launch_slot():
        job = jobs.poll(run_dir)
        if job.active:
            raise jobs.JobError(f"{job.name!r} is {job.state}; nothing to resume")
        if not job.checkpoints:
            raise jobs.JobError(f"{job.name!r} has no complete checkpoint to resume from; start a new run")
        try:
            cfg = TrainConfig.from_dict({**job.config, **overrides, "run_dir": str(run_dir)})
        except (TypeError, ValueError) as err:
            raise jobs.JobError(f"{run_dir / rp.CONFIG}: cannot be used to resume ({err})") from None
        if not job.config:
            raise jobs.JobError(f"{run_dir / rp.CONFIG} is missing or unreadable; cannot resume")
        validate_settings(cfg, new_run=False)
        check_capacity(run_dir)
        return _launch(cfg, command(cfg, resume=True, nproc=nproc), run_dir)


def stop(run_dir: str | os.PathLike) -> jobs.Job:
    """Ask the trainer to save and exit (SIGTERM); returns at once, the job becomes `stopped`."""
    run_dir = Path(run_dir).resolve()
    job = jobs.poll(run_dir)
    if not job.active or job.pid is None:
        raise jobs.JobError(f"{job.name!r} is not running ({job.state})")
    pid = job.pid
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp() and "explorer.train" in _cmdline(pgid):
            os.killpg(pgid, signal.SIGTERM)          # the trainer's own session (torchrun and its ranks)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return jobs.poll(run_dir)


def _cmdline(pid: int) -> str:
    return " ".join(command_line(pid) or ())


