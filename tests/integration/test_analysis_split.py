"""The head lab and the alignment scorecard under `torchrun --nproc-per-node 2` (CPU, gloo) write the
same JSON numbers as one process: the split of explorer.runtime.split, end to end, on the shipped
numbers model with a few sentences."""
from __future__ import annotations

import json
import sys

import pytest

from explorer.runtime.clock import TIMING_KEYS
from support.train_helpers import run

NUMBERS = "checkpoints/numbers-en-de"
COMMANDS = {"heads": ["--sentences", "6", "--seeds", "1", "--points", "1"],
            "align": ["--pairs", "6", "--attribution-pairs", "2", "--ig-steps", "4", "--no-eflomal"]}


def numbers(path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in TIMING_KEYS}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_two_processes_under_torchrun_write_what_one_process_writes(command, tmp_path):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    single = run([sys.executable, "-m", "explorer", command, NUMBERS, *COMMANDS[command], "--workers", "1",
                  "--out", str(one)])
    assert single.returncode == 0, single.stderr[-3000:]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    split = run(launcher + ["-m", "explorer", command, NUMBERS, *COMMANDS[command], "--out", str(two)])
    assert split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    assert split.stdout.count("written:") == 1                    # the main process alone reports and writes
    assert json.loads(two.read_text())["processes"] == 2
    assert numbers(two) == numbers(one)
