"""A run folder deleted (rm -rf, outside the app) while its trainer runs. The trainer trains on and writes the
folder again, but its flock is on the deleted lock file: it must still be seen as the run's live trainer,
so that Resume (a second trainer writing the same run) is refused, the job limit counts it and Stop ends it.
The test deletes the lock file alone: the folder deleted as a whole may also end the trainer (a metrics line
appended to a folder that is gone for a moment), which is no part of what is tested."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from explorer.config import TrainConfig
from explorer.store import run_paths as rp
from explorer.training import jobs, launch
from support.train_helpers import wait_for_run
from support.training_fixtures import make_tokenizer
from support.waiting import run_watched


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("EXPLORER_MAX_JOBS", "1")
    return tmp_path


def numbers_cfg(run_dir, **overrides) -> TrainConfig:
    base = dict(run_dir=str(run_dir), dataset="numbers", preset="tiny", tokenizer_type="word", max_steps=1_000_000,
                batch_tokens=400, warmup=10, lr_factor=0.5, eval_every=0, save_every=5, eval_sentences=3,
                keep_last=3, log_every=1, threads=1)
    return TrainConfig(**{**base, **overrides})


def test_a_trainer_whose_run_folder_was_deleted_still_holds_its_run(root):
    run = root / "deleted"
    make_tokenizer(run / "tokenizer")                           # the trainer reuses run_dir/tokenizer
    launch.start(numbers_cfg(run))
    trainer = jobs.LAUNCHED.pop(str(run))     # as after an app restart: the run folder alone says what runs
    job = wait_for_run(run, lambda j: j.state == "running" and j.checkpoints, "the first checkpoint")
    pid = job.pid
    try:
        (run / rp.LOCK).unlink()            # as rm -rf of the folder does; the trainer never writes it again
        step = job.step                     # (the whole folder deleted may also end the trainer, by chance)
        job = wait_for_run(run, lambda j: j.step > step + 2, "the trainer to train on")
        job = jobs.poll(run)
        assert job.state == "running" and job.active and job.pid == pid, job
        assert [j.name for j in jobs.list_jobs() if j.active] == ["deleted"]
        with pytest.raises(jobs.JobError, match="is running; nothing to resume"):
            launch.resume(run)
        with pytest.raises(jobs.JobError, match="limit is 1"):                   # it counts against the limit
            launch.start(numbers_cfg(root / "another"))
        second = run_watched([sys.executable, "-m", "explorer.train", "--run-dir", str(run), "--resume"],
                             "a second trainer on the run", cwd=rp.REPO_ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert second.returncode == 1 and f"another trainer holds {run / rp.LOCK} (pid {pid})" in second.stderr, \
            second.stderr

        launch.stop(run)
        job = wait_for_run(run, lambda j: not j.active, "the trainer to stop")
        assert job.state == "stopped" and not job.note and job.resumable
    finally:                                # never left training: killed if still this run's trainer
        with contextlib.suppress(OSError):
            if str(run) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)
        trainer.wait()
