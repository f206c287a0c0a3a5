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
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASE_ARGS = ["--dataset", "numbers", "--preset", "tiny", "--tokenizer-type", "word", "--batch-tokens", "400",
             "--warmup", "10", "--threads", "1", "--eval-every", "0", "--log-every", "1"]
TIMEOUT = 180  # seconds a trainer subprocess may take before the test gives up (a hang, not a timing test)


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
    return subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=TIMEOUT)


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, proc: subprocess.Popen | None = None, what: str = "condition", limit: float = TIMEOUT):
    """Poll until predicate() is truthy; fail early (with the trainer's output) if the trainer exits."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"trainer exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


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
