"""The trainer under `torchrun --nproc-per-node 2` on CPU (gloo): DistributedDataParallel end to end.

Rank 0 alone writes the run directory; both ranks stop together; DDP keeps their weights identical
(the trainer all-reduces every weight's max and min at the end and prints the largest difference).
"""
from __future__ import annotations

import sys

import pytest

from explorer.store import run_files as rf
from explorer.store.checkpoint import load_checkpoint, load_trainer_state
from support.train_helpers import (checkpoint_steps, numbers_tokenizer, run, seed_tokenizer,  # noqa: F401
                           status, train_records, trainer_cmd)


@pytest.mark.slow
def test_ddp_two_cpu_processes_train_to_the_end(tmp_path, numbers_tokenizer):
    run_dir = seed_tokenizer(tmp_path / "ddp", numbers_tokenizer)
    cmd = trainer_cmd(run_dir, "--max-steps", "6", "--save-every", "3", "--eval-every", "3",
                      "--eval-sentences", "4", "--accum-steps", "2")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    proc = run(launcher + cmd[1:])                 # cmd[1:] = ["-m", "explorer.train", ...]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    assert "DDP: 2 ranks, largest weight difference between ranks 0 (identical)" in proc.stdout
    assert proc.stdout.count("finished: step 6/6") == 1          # one summary: rank 0's
    st = status(run_dir)
    assert st["state"] == "finished" and st["step"] == 6
    assert [r["step"] for r in train_records(run_dir)] == list(range(1, 7))   # each step logged once
    evals = [r["step"] for r in rf.read_metrics(run_dir) if r["kind"] == "eval"]
    assert evals == [3, 6]
    assert checkpoint_steps(run_dir) == [3, 6]
    ckpt = run_dir / "checkpoints" / "step_000006"
    assert load_trainer_state(ckpt)["step"] == 6
    loaded = load_checkpoint(ckpt)
    assert loaded.meta["training"]["step"] == 6
    assert not any(p.name.startswith(".") for p in (run_dir / "checkpoints").iterdir())  # no stray tmp dirs
