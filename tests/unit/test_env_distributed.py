"""torchrun's variables (WORLD_SIZE, RANK, LOCAL_RANK) are read once, checked, for the analyses and the
trainer alike (explorer.runtime.split.launch): a bad value is one `error: ...` line, not a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from explorer.runtime import split
from explorer.runtime.split import LaunchError, Launch, launch
from explorer.training.distributed import Dist
from support.waiting import STALL_S

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _set(monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_no_variables_or_a_world_of_one_is_one_process(monkeypatch):
    assert launch() == Launch()
    _set(monkeypatch, WORLD_SIZE="1", RANK="7")          # a world of one: a leftover RANK is not read
    assert launch() == Launch() and split.from_env() is split.ONE and not Dist.from_env().active


def test_a_checked_world_gives_its_rank_and_local_rank(monkeypatch):
    _set(monkeypatch, WORLD_SIZE=" 4 ", RANK="3", LOCAL_RANK="1")
    assert launch() == Launch(rank=3, world=4, local_rank=1)


@pytest.mark.parametrize("env, said", [
    ({"WORLD_SIZE": "abc"}, "error: WORLD_SIZE=abc is not a whole number"),
    ({"WORLD_SIZE": "²"}, "error: WORLD_SIZE=² is not a whole number"),
    ({"WORLD_SIZE": "-2"}, "error: WORLD_SIZE=-2 is not a whole number"),
    ({"WORLD_SIZE": "0"}, "error: WORLD_SIZE=0 is not a number of processes"),
    ({"WORLD_SIZE": "2", "RANK": "x"}, "error: RANK=x is not a whole number"),
    ({"WORLD_SIZE": "2"}, "error: WORLD_SIZE=2 but RANK is not set"),
    ({"WORLD_SIZE": "2", "RANK": "5"}, "error: RANK=5 is not below WORLD_SIZE=2 (ranks are 0 to 1)"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "error: RANK=2 is not below WORLD_SIZE=2"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "9"}, "error: LOCAL_RANK=9 is not below WORLD_SIZE=2"),
])
def test_a_bad_environment_is_one_error_line_for_the_analyses_and_the_trainer(monkeypatch, env, said):
    _set(monkeypatch, **env)
    for read in (split.from_env, Dist.from_env):
        with pytest.raises(LaunchError) as caught:
            read()
        assert str(caught.value.code).startswith(said) and "\n" not in str(caught.value.code)
        assert isinstance(caught.value, SystemExit)        # printed as that one line by Python, exit 1


def test_a_group_that_cannot_start_is_one_line(monkeypatch):
    _set(monkeypatch, WORLD_SIZE="2", RANK="1")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(LaunchError, match="torch.distributed could not start"):
        split.from_env()


@pytest.mark.parametrize("command", [
    ["train", "--dataset", "numbers", "--max-steps", "1"],
    ["heads", os.path.join(ROOT, "checkpoints", "numbers-en-de"), "--workers", "1"],
    ["heads", os.path.join(ROOT, "checkpoints", "numbers-en-de"), "--workers", "2"],    # workers.wants_launch reads it
])
def test_a_command_under_a_bad_world_size_prints_one_line(tmp_path, command):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    env.update(WORLD_SIZE="abc", EXPLORER_RUNS_DIR=str(tmp_path / "runs"), EXPLORER_DATA_DIR=str(tmp_path / "data"),
               OMP_NUM_THREADS="1")
    extra = ["--run-dir", str(tmp_path / "runs" / "r")] if command[0] == "train" else ["--out", str(tmp_path / "h.json")]
    proc = subprocess.run([sys.executable, "-m", "explorer", *command, *extra], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=STALL_S)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "error: WORLD_SIZE=abc is not a whole number (torchrun sets it; without WORLD_SIZE a command runs as "
        "one process)"]


def test_the_trainers_memory_check_reads_the_local_world_checked(monkeypatch):
    """LOCAL_WORLD_SIZE scales the memory check on CPU: read as torchrun's other variables are."""
    from explorer.runtime.split import local_world_size
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert local_world_size() == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert local_world_size() == 4
    for bad in ("abc", "0"):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", bad)
        with pytest.raises(LaunchError, match=f"LOCAL_WORLD_SIZE={bad} is not"):
            local_world_size()
