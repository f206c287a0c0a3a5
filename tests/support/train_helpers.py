"""Running the real trainer (`python -m explorer.train`) as a subprocess on the numbers task.

Everything is tiny (tiny preset, 400-token batches, one thread) so a run costs a few seconds, most
of it Python start-up. Runs share one word tokenizer, copied into each run directory, and the
numbers corpus cache in the repository's data/ (built once, ~15 s, then reused).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.waiting import run_watched, tree_signature, wait_until

REPO = Path(__file__).resolve().parents[2]
BASE_ARGS = ["--dataset", "numbers", "--preset", "tiny", "--tokenizer-type", "word", "--batch-tokens", "400",
             "--warmup", "10", "--threads", "1", "--eval-every", "0", "--log-every", "1"]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def trainer_cmd(run_dir: Path, *args: str, module: str = "explorer.train") -> list[str]:
    return [sys.executable, "-m", module, "--run-dir", str(run_dir), *BASE_ARGS, *args]


def patched_cmd(run_dir: Path, setup: str, *args: str) -> list[str]:
    """The trainer's command with `setup` (Python source) run first in its process: a fault injected
    into what it uses (a full disk, a check skipped, a memory cap), the trainer itself unchanged."""
    code = f"{setup}\nimport sys\nfrom explorer.train import main\nsys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, "--run-dir", str(run_dir), *BASE_ARGS, *args]


def seed_tokenizer(run_dir: Path, tokenizer_dir: Path) -> Path:
    """Give a run the shared tokenizer (the trainer loads run_dir/tokenizer if present)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tokenizer_dir, run_dir / "tokenizer", dirs_exist_ok=True)
    return run_dir


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run a trainer (or an analysis command) to its end. Its output and the files in its run directory (or
    --out) are its progress: it is given up on (killed, the test failed) only after the stall window without
    either, never on a deadline."""
    watch = [Path(cmd[cmd.index(flag) + 1]) for flag in ("--run-dir", "--out") if flag in cmd]
    return run_watched(cmd, f"the trainer ({' '.join(cmd[-6:])})", watch, cwd=REPO, env=env())


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, proc: subprocess.Popen, what: str, run_dir: Path):
    """Poll until predicate() is truthy; fail early (with the trainer's output) if the trainer exits, and
    only after the stall window if nothing under run_dir changed (a hang guard, not a deadline)."""
    def exited():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"trainer exited ({proc.returncode}) before {what}:\n{out}\n{err}")

    return wait_until(predicate, what, progress=lambda: tree_signature(run_dir), poll=0.02, check=exited)


def wait_for_run(run_dir: Path, until, what: str):
    """Poll a run (explorer.training.jobs.poll) until `until(job)` holds and return the job; its directory's
    files (the trainer logs every step) are its progress, so only a stall fails, with the run's state and log."""
    from explorer.store import run_files as rf
    from explorer.training import jobs

    try:
        return wait_until(lambda: (lambda job: until(job) and job)(jobs.poll(run_dir)), what,
                          progress=lambda: tree_signature(run_dir), poll=0.25)
    except AssertionError as stalled:
        raise AssertionError(f"{stalled}: {jobs.poll(run_dir)}\n{rf.log_tail(run_dir)}") from None


def finish(proc: subprocess.Popen, what: str, run_dir: Path) -> tuple[str, str]:
    """Wait for a started trainer to exit and return its (stdout, stderr); its run directory's files are its
    progress (it logs every step there), so it is killed and the test failed only after a stall."""
    try:
        wait_until(lambda: proc.poll() is not None, what, progress=lambda: tree_signature(run_dir), poll=0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.communicate()


def status(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def train_records(run_dir: Path) -> list[dict]:
    from explorer.store.run_files import read_metrics
    return [r for r in read_metrics(run_dir) if r["kind"] == "train"]


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in train_records(run_dir)}


def checkpoint_steps(run_dir: Path) -> list[int]:
    from explorer.store.run_paths import checkpoint_dirs
    return [int(p.name.split("_")[1]) for p in checkpoint_dirs(run_dir)]


@pytest.fixture(scope="session")
def numbers_tokenizer(tmp_path_factory) -> Path:
    """One word tokenizer for the numbers corpus, built the way the trainer builds it."""
    from explorer.config import TrainConfig
    from explorer.data import load_corpus
    from explorer.training.inputs import prepare_tokenizer

    corpus = load_corpus("numbers")
    run_dir = tmp_path_factory.mktemp("tokenizer")
    prepare_tokenizer(TrainConfig(tokenizer_type="word"), corpus, run_dir, None)
    return run_dir / "tokenizer"
