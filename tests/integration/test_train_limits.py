"""The trainer's limits and statuses, end to end: settings it cannot hold are refused with a message,
and every way a run ends leaves status.json saying so.

These checks start the real trainer on the numbers task (some with a fault injected into its process,
train_helpers.patched_cmd) or build it in-process on the shared numbers tokenizer (train_helpers.numbers_tokenizer,
~20 s to build once per session). The process-free half (argument limits through train_args.validate, the memory
estimate, status writes on a full disk, checkpoint listing) is in tests/unit/test_train_limits_in_process.py.
"""
from __future__ import annotations

import json
import re
import sys
import time

import pytest

from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.files.names import RUN_MARKER
from explorer.store.run_clearing import mark_run
from explorer.training import memory
from explorer import train
from explorer.training import trainer
from explorer.store.checkpoint import load_checkpoint
from explorer.config import TrainConfig
from explorer.training.args import parse_config, validate
from support.train_helpers import (REPO, checkpoint_steps, env, numbers_tokenizer, patched_cmd, run,  # noqa: F401
                                  seed_tokenizer, status, trainer_cmd)
from support.waiting import run_watched


# ---- the memory check (training.memory, Trainer setup) --------------------------------------
@pytest.mark.slow
def test_a_batch_too_big_for_memory_is_refused_before_the_first_step(tmp_path, numbers_tokenizer):
    """Without validate's limit: 1e12 reaches the trainer, whose memory check must refuse it at once.

    The child's address space is capped at 4 GiB (a trainer without the check runs into the cap, not
    into the machine's memory) and it sees at most 8 GiB available, whatever the machine has.
    """
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    setup = (
        "import atexit, resource, sys, time\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so it would report the test
        # process's own peak (large after the base-size app tests), not this trainer's
        "atexit.register(lambda: print('maxrss_mib=' + str(int([l.split()[1] for l in open('/proc/self/status')"
        " if l.startswith('VmHWM')][0]) >> 10), file=sys.stderr))\n"
        "import explorer.training.args as args, explorer.training.memory as memory\n"
        "args.validate = lambda cfg: None\n"
        "real = memory.available_memory_bytes\n"
        "memory.available_memory_bytes = lambda device: min(real(device) or 8 << 30, 8 << 30)\n")
    t0 = time.monotonic()
    proc = run(patched_cmd(run_dir, setup, "--batch-tokens", str(10 ** 12), "--max-steps", "5"))
    seconds = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "error: batch_tokens 1000000000000 needs about " in proc.stderr
    maxrss_mib = int(re.search(r"maxrss_mib=(\d+)", proc.stderr).group(1))
    print(f"refused in {seconds:.1f} s (process start included), peak resident {maxrss_mib} MiB")
    assert maxrss_mib < 1536
    st = status(run_dir)
    assert st["state"] == "failed"
    reason = st["last_error"]
    assert re.search(r"batch_tokens 1000000000000 needs about [\d.]+ GiB per step; [\d.]+ GiB available; "
                     r"lower --batch-tokens", reason), reason
    free = float(re.search(r"([\d.]+) GiB available", reason).group(1))
    assert free <= 8.0                                    # the injected cap reached the check (not a dead patch)
    assert not rf.RunLock(run_dir).is_held_by_other() and checkpoint_steps(run_dir) == []


def test_more_accumulation_steps_than_batches_is_refused_not_a_silent_hang(tmp_path, numbers_tokenizer):
    """An epoch must hold accum_steps batches, or the loop looks for a step forever (status `running`)."""
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    cfg = TrainConfig(run_dir=str(run_dir), dataset="numbers", tokenizer_type="word", threads=1,
                      batch_tokens=400_000, accum_steps=8, max_steps=5)
    validate(cfg)
    with pytest.raises(memory.SetupRefused, match=r"accum_steps 8 needs 8 batches per epoch; batch_tokens "
                                                 r"400000 makes \d; lower --accum-steps or --batch-tokens"):
        trainer.Trainer(cfg)
    assert status(run_dir)["state"] == "failed" and "accum_steps 8" in status(run_dir)["last_error"]


# ---- a full disk --------------------------------------------------------------------------------------
# Injected into the trainer's process: the second checkpoint (step 20) finds the disk full, and from
# then on no new file can be made in the run directory (the atomic status write's temp file).
DISK_FULL = """
import builtins, errno, os
import explorer.store.checkpoint as checkpoint
RUN = os.path.realpath({run_dir!r})
full = False
def no_space(path):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
def in_run(path):
    return os.path.realpath(path).startswith(RUN + os.sep)
real_save_file, real_os_open, real_open = checkpoint.save_file, os.open, builtins.open
def save_file(tensors, filename, metadata=None):
    global full
    full = full or "step_000020" in filename
    if full:
        no_space(filename)
    return real_save_file(tensors, filename, metadata=metadata)
def os_open(path, flags, *args, **kwargs):
    if full and flags & os.O_CREAT and not os.path.exists(path) and in_run(path):
        no_space(path)
    return real_os_open(path, flags, *args, **kwargs)
checkpoint.save_file, os.open = save_file, os_open
"""
# ... and not even an existing file can be rewritten (a copy-on-write filesystem).
NOR_IN_PLACE = """
def open_(file, mode="r", *args, **kwargs):
    if full and "+" in mode and in_run(file):
        no_space(file)
    return real_open(file, mode, *args, **kwargs)
builtins.open = open_
"""


@pytest.mark.slow
@pytest.mark.parametrize("in_place_fails_too", [False, True])
def test_a_full_disk_during_a_save_fails_the_run_and_keeps_the_last_checkpoint(tmp_path, numbers_tokenizer,
                                                                                in_place_fails_too):
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    setup = DISK_FULL.format(run_dir=str(run_dir)) + (NOR_IN_PLACE if in_place_fails_too else "")
    proc = run(patched_cmd(run_dir, setup, "--max-steps", "30", "--save-every", "10"))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "failed: disk full" in proc.stderr and "No space left on device" in proc.stderr
    st = status(run_dir)
    if in_place_fails_too:                  # status.json keeps its last state; stderr says why, once
        assert st["state"] == "running"
        said = [line for line in proc.stderr.splitlines() if "cannot record" in line]
        assert len(said) == 1 and "'failed'" in said[0] and "No space left on device" in said[0], proc.stderr
    else:
        assert st["state"] == "failed" and st["step"] == 20
        assert "disk full" in st["last_error"] and "No space left on device" in st["last_error"]
    assert checkpoint_steps(run_dir) == [10]
    assert load_checkpoint(run_dir / rp.CHECKPOINTS / "step_000010").meta["training"]["step"] == 10
    debris = [p.name for d in (run_dir, run_dir / rp.CHECKPOINTS) for p in d.iterdir()
              if p.name.startswith(".") and p.name != RUN_MARKER]              # the trainer's mark is no debris
    assert debris == []
    assert not rf.RunLock(run_dir).is_held_by_other()


# ---- a fresh run into a directory that holds one -----------------------------------------------------
def _old_run(run_dir, tokenizer_dir, parts=("status", "checkpoints")):
    """A finished 30-step run as the trainer leaves it (checkpoints reduced to their marker files)."""
    seed_tokenizer(run_dir, tokenizer_dir)
    mark_run(run_dir)
    (run_dir / rp.LOG).write_text("# launched: old run\nfinished: step 30/30\n")
    (run_dir / rp.METRICS).write_text("".join(json.dumps({"kind": "train", "step": s, "loss": 1.0}) + "\n"
                                              for s in (10, 20, 30)))
    write_json_atomic(run_dir / rp.CONFIG, TrainConfig(run_dir=str(run_dir), max_steps=30).to_dict())
    if "status" in parts:
        rf.write_status(run_dir, state="finished", step=30, last_checkpoint=str(run_dir / "checkpoints/step_000030"))
    if "checkpoints" in parts:
        for step in (20, 30):
            d = run_dir / rp.CHECKPOINTS / f"step_{step:06d}"
            d.mkdir(parents=True)
            (d / "config.json").write_text('{"format_version": 1}')
            (d / "model.safetensors").write_text("")
    return run_dir


def _snapshot(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("parts", [("status", "checkpoints"), ("status",), ("checkpoints",)])
def test_a_fresh_run_into_a_directory_holding_a_run_is_refused(tmp_path, capsys, numbers_tokenizer, parts):
    """It used to start: keep_last then pruned the new run's checkpoints (the old ones sort later)."""
    run_dir = _old_run(tmp_path / "x", numbers_tokenizer, parts)
    before = _snapshot(run_dir)
    code = train.main(["--run-dir", str(run_dir), "--dataset", "numbers", "--tokenizer-type", "word",
                       "--threads", "1", "--max-steps", "1", "--save-every", "0", "--eval-every", "0"])
    assert code == 2
    assert f"{run_dir} already holds a run; use --resume to continue it or --overwrite to start over" \
        in capsys.readouterr().err
    assert _snapshot(run_dir) == before                               # nothing touched


def test_resume_and_overwrite_together_are_refused(tmp_path, capsys, numbers_tokenizer):
    run_dir = _old_run(tmp_path / "x", numbers_tokenizer)
    before = _snapshot(run_dir)
    assert train.main(["--run-dir", str(run_dir), "--resume", "--overwrite"]) == 2
    assert "--resume and --overwrite" in capsys.readouterr().err
    assert _snapshot(run_dir) == before


def test_a_directory_with_only_a_log_or_a_tokenizer_is_not_a_run(tmp_path, numbers_tokenizer):
    """The app writes train.log before it launches a new run; tests seed a tokenizer."""
    run_dir = seed_tokenizer(tmp_path / "x", numbers_tokenizer)
    (run_dir / rp.LOG).write_text("# launched\n")
    assert not rp.holds_run(run_dir)
    assert parse_config(["--run-dir", str(run_dir)])[1] is False


@pytest.mark.slow
def test_overwrite_starts_over_and_keeps_the_log(tmp_path, numbers_tokenizer):
    run_dir = _old_run(tmp_path / "x", numbers_tokenizer)
    log = (run_dir / rp.LOG).read_text()
    proc = run(trainer_cmd(run_dir, "--overwrite", "--max-steps", "10", "--save-every", "10"))
    assert proc.returncode == 0, proc.stderr
    assert checkpoint_steps(run_dir) == [10]
    assert [r["step"] for r in rf.read_metrics(run_dir)] == list(range(1, 11))
    st = status(run_dir)
    assert st["state"] == "finished" and st["step"] == 10 and st["total_steps"] == 10
    assert st["last_checkpoint"] == str(run_dir / rp.CHECKPOINTS / "step_000010")
    assert load_checkpoint(st["last_checkpoint"]).meta["training"]["step"] == 10
    assert json.loads((run_dir / rp.CONFIG).read_text())["max_steps"] == 10
    assert (run_dir / rp.LOG).read_text() == log
    assert (run_dir / "tokenizer").is_dir()                           # trained again for this run's settings


@pytest.mark.slow
@pytest.mark.parametrize("before", ["none", "never started"])
def test_overwrite_into_a_new_or_never_started_folder_starts_the_run(tmp_path, numbers_tokenizer, before):
    """--overwrite with nothing to clear: a folder that does not exist yet, or one a trainer stopped in before
    its setup (its lock and a failed status, no mark). It used to raise RunRefused after taking the lock,
    a traceback, and leave a folder every later --overwrite refused."""
    run_dir = tmp_path / "new"
    if before == "never started":
        run_dir.mkdir()
        (run_dir / rp.STATUS).write_text(json.dumps({"state": "failed", "last_error": "KeyboardInterrupt"}))
        (run_dir / rp.LOCK).write_text("")
    proc = run(trainer_cmd(run_dir, "--overwrite", "--max-steps", "2", "--save-every", "2"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert checkpoint_steps(run_dir) == [2] and status(run_dir)["state"] == "finished"


@pytest.mark.slow
def test_a_fine_tune_cuts_sentences_to_the_positions_its_checkpoint_has(tmp_path):
    """--max-len beyond the checkpoint's position table: a 361-piece source crashed the first step
    ("sequence of 361 positions exceeds max_len=256"); sentences are now cut to the table, and the log
    and the saved config say so."""
    shipped = REPO / "checkpoints" / "numbers-en-de"
    if not (shipped / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    table = load_checkpoint(shipped).config.max_len
    corpus = tmp_path / "long.tsv"
    corpus.write_text("".join(f"{'one two three ' * 120}{i}\t{'eins zwei drei ' * 120}\n" for i in range(20)))
    run_dir = tmp_path / "fine-tune"
    cmd = [sys.executable, "-m", "explorer.train", "--run-dir", str(run_dir), "--dataset", str(corpus),
           "--init-from", str(shipped), "--max-len", str(4 * table), "--max-steps", "1", "--batch-tokens", "4000",
           "--eval-every", "0", "--save-every", "0", "--threads", "1"]
    proc = run_watched(cmd, "the fine-tune", [run_dir], cwd=REPO,
                       env={**env(), "EXPLORER_DATA_DIR": str(tmp_path / "data")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"sentences are cut to {table} pieces" in proc.stdout
    assert json.loads((run_dir / rp.CONFIG).read_text())["max_len"] == table


def test_overwrite_of_a_run_in_progress_removes_nothing(tmp_path, numbers_tokenizer):
    run_dir = _old_run(tmp_path / "x", numbers_tokenizer)
    holder = rf.RunLock(run_dir)
    assert holder.acquire()                                           # as a running trainer holds it
    before = _snapshot(run_dir)
    try:
        with pytest.raises(SystemExit, match="refused: another trainer holds"):
            train.main(["--run-dir", str(run_dir), "--overwrite", "--dataset", "numbers", "--threads", "1"])
    finally:
        holder.release()
    assert _snapshot(run_dir) == before


# ---- a checkpoint left renamed aside by a save killed mid-swap ---------------------------------------
@pytest.mark.slow
def test_resume_recovers_a_checkpoint_left_aside_and_continues_from_it(tmp_path, numbers_tokenizer):
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    proc = run(trainer_cmd(run_dir, "--max-steps", "20", "--save-every", "10"))
    assert proc.returncode == 0, proc.stderr
    root = run_dir / rp.CHECKPOINTS
    aside = root / ".step_000020.old-99999-0badc0de"
    (root / "step_000020").rename(aside)                                 # killed between swap_in's renames
    proc = run(trainer_cmd(run_dir, "--resume", "--max-steps", "30", "--save-every", "10"))
    assert proc.returncode == 0, proc.stderr
    assert f"resumed from {root / 'step_000020'} at step 20 " in proc.stdout
    assert not aside.exists() and checkpoint_steps(run_dir) == [10, 20, 30]
    assert load_checkpoint(root / "step_000020").meta["training"]["step"] == 20
    assert [r["step"] for r in rf.read_metrics(run_dir)] == list(range(1, 31))      # none trained twice
    assert status(run_dir)["state"] == "finished" and status(run_dir)["step"] == 30
