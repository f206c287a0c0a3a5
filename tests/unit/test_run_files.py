"""explorer.store.run_files: where runs live, checkpoint naming, the readers every module uses, and
the one disk-space estimate the job launcher and the trainer share."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from explorer.config import TrainConfig, preset
from explorer.model import parameter_count
from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.training import jobs, launch
from explorer.training.args import planned_model_config
from explorer.training.saving import check_room
from support.waiting import STALL_S


def test_runs_root_is_the_repositorys_unless_the_environment_says(tmp_path, monkeypatch):
    monkeypatch.delenv(rp.RUNS_ENV, raising=False)
    assert rp.runs_root() == (rp.REPO_ROOT / "runs").resolve()
    assert (rp.REPO_ROOT / "explorer" / "store" / "run_files.py").is_file()
    assert rp.shipped_root() == rp.REPO_ROOT / "checkpoints"
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    monkeypatch.setenv(rp.RUNS_ENV, str(tmp_path / "link"))
    assert rp.runs_root() == tmp_path / "real"                     # resolved: one name for one folder


def test_checkpoint_names_round_trip_and_sort_by_step(tmp_path):
    run = tmp_path / "numbers"
    paths = [rp.checkpoint_dir(run, step) for step in (1000, 20, 300)]
    assert paths[1] == run / "checkpoints" / "step_000020"
    assert [rp.step_of(p) for p in paths] == [1000, 20, 300]
    assert sorted(paths) == [rp.checkpoint_dir(run, s) for s in (20, 300, 1000)]
    assert {rp.run_of(p) for p in paths} == {run}
    assert rp.step_of(rp.checkpoint_dir(run, 0)) == 0
    for other in (rp.shipped_root() / "numbers-en-de", run / "checkpoints" / "step_x", run / "step_000020",
                  run / "checkpoints" / ".step_000020.old-1-2"):
        assert rp.run_of(other) is None
    assert rp.step_of("step_12a") is None and rp.step_of(run / "step_000020") == 20


def test_train_config_reader_never_raises(tmp_path):
    assert rf.read_train_config(tmp_path) == {}
    (tmp_path / rp.CONFIG).write_text("{torn")
    assert rf.read_train_config(tmp_path) == {}
    (tmp_path / rp.CONFIG).write_text("[1, 2]")
    assert rf.read_train_config(tmp_path) == {}
    write_json_atomic(tmp_path / rp.CONFIG, TrainConfig(max_steps=7).to_dict())
    assert rf.read_train_config(tmp_path)["max_steps"] == 7
    assert jobs.poll(tmp_path).config == rf.read_train_config(tmp_path)


def test_curves_are_read_from_the_run_and_a_torn_line_is_skipped(tmp_path):
    assert not rf.has_metrics(tmp_path) and len(rf.read_curves(tmp_path).step) == 0
    for step in (10, 20):
        rf.append_metrics(tmp_path, {"kind": "train", "step": step, "loss": 1.0 / step, "elapsed": step})
    rf.append_metrics(tmp_path, {"kind": "eval", "step": 20, "bleu": 12.5})
    with open(tmp_path / rp.METRICS, "a") as f:
        f.write('{"kind": "train", "step": 30, "lo')                   # a kill mid-write
    curves = rf.read_curves(tmp_path)
    assert rf.has_metrics(tmp_path)
    assert curves.step.tolist() == [10, 20] and curves.eval_step.tolist() == [20] and curves.bleu.tolist() == [12.5]


def test_resume_drops_the_records_of_steps_about_to_be_trained_again(tmp_path):
    for step in (10, 20, 30):
        rf.append_metrics(tmp_path, {"kind": "train", "step": step})
    rf.append_metrics(tmp_path, {"kind": "note"})                      # no step: kept
    rf.drop_metrics_after(tmp_path, 20)
    assert [r.get("step") for r in rf.read_metrics(tmp_path)] == [10, 20, None]
    rf.drop_metrics_after(tmp_path / "missing", 5)                     # nothing to drop, no error


def test_the_lock_holder_pid_is_read_back(tmp_path):
    lock = rf.RunLock(tmp_path)
    assert lock.holder_pid() is None
    assert lock.acquire()
    try:
        assert lock.holder_pid() == os.getpid()
    finally:
        lock.release()
    lock.path.write_text("not a pid")
    assert lock.holder_pid() is None


def test_a_live_trainer_of_the_run_holds_it_without_its_lock_file(tmp_path):
    """A trainer whose lock file went with its folder (rm -rf) is still found: its status.json's pid, alive,
    running `explorer.train --run-dir` on this folder, named relative to its own working folder (read
    through psutil, so not on Linux alone); a process of another folder, or no trainer, holds nothing."""
    import subprocess
    import sys
    run = tmp_path / "runs" / "demo"
    run.mkdir(parents=True)
    waits = "import sys; sys.stdin.read()"                   # alive until the test closes its pipe: no clock
    sleeper = subprocess.Popen([sys.executable, "-c", waits, "explorer.train", "--run-dir", "runs/demo"],
                               cwd=tmp_path, stdin=subprocess.PIPE)
    other = subprocess.Popen([sys.executable, "-c", waits, "--run-dir", "runs/demo"], cwd=tmp_path,
                             stdin=subprocess.PIPE)
    try:
        rf.write_status(run, state="running", pid=sleeper.pid)
        lock = rf.RunLock(run)
        assert not lock.path.exists()
        assert lock.live_trainer() == sleeper.pid and lock.is_held_by_other() and lock.holder_pid() == sleeper.pid
        assert not lock.acquire()                                   # a second trainer would write beside it
        elsewhere = tmp_path / "runs" / "other"
        elsewhere.mkdir()
        rf.write_status(elsewhere, state="running", pid=sleeper.pid)
        assert rf.RunLock(elsewhere).live_trainer() is None         # it trains another folder
        rf.write_status(run, state="running", pid=other.pid)
        assert lock.live_trainer() is None                          # not a trainer
        rf.write_status(run, state="done", pid=sleeper.pid)
        assert lock.live_trainer() is None                          # no longer running, by its status
    finally:
        for proc in (sleeper, other):
            proc.kill()
            proc.wait()
    rf.write_status(run, state="running", pid=sleeper.pid)
    assert lock.live_trainer() is None                              # gone


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_a_lock_name_that_is_not_a_regular_file_is_refused_in_one_line_and_held_by_no_one(tmp_path, kind):
    from explorer.store.run_clearing import RunRefused
    path = tmp_path / rp.LOCK
    target = tmp_path / "elsewhere.lock"
    target.write_text("")
    {"directory": path.mkdir, "fifo": lambda: os.mkfifo(path), "symlink": lambda: path.symlink_to(target)}[kind]()
    lock = rf.RunLock(tmp_path)
    said = {"directory": "a directory", "fifo": "a FIFO (named pipe)", "symlink": "a symbolic link"}[kind]
    with pytest.raises(RunRefused, match="^" + re.escape(f"{path} is {said}, not the lock file a trainer writes there")):
        lock.acquire()
    assert not lock.is_held_by_other()          # a FIFO opened for reading used to wait here for a writer
    assert target.read_text() == ""             # nothing written through the symlink


def test_train_resume_on_a_lock_that_is_a_directory_says_one_line(tmp_path):
    import subprocess
    import sys
    run_dir = tmp_path / "runs" / "r"
    (run_dir / rp.LOCK).mkdir(parents=True)
    env = {**os.environ, "EXPLORER_RUNS_DIR": str(tmp_path / "runs"), "EXPLORER_DATA_DIR": str(tmp_path / "data"),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "explorer", "train", "--run-dir", str(run_dir), "--resume",
                           "--dataset", "numbers", "--max-steps", "3"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=STALL_S)   # a hang guard only
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: {run_dir / rp.LOCK} is a directory, not the lock file a trainer writes there; remove it and start again"]


def test_a_launch_that_left_only_its_log_blocks_the_name_for_jobs_not_for_the_trainer(tmp_path):
    assert not rp.holds_run(tmp_path)
    launch.check_new(tmp_path)
    (tmp_path / rp.LOG).write_text("launched\n")
    assert not rp.holds_run(tmp_path)                                  # the trainer's own check
    with pytest.raises(jobs.JobError, match="already exists"):
        launch.check_new(tmp_path)
    (tmp_path / rp.LOG).unlink()
    (tmp_path / rp.STATUS).write_text(json.dumps({"state": "failed"}))
    assert rp.holds_run(tmp_path)


def test_one_disk_estimate_for_the_launcher_and_the_trainer(tmp_path, monkeypatch):
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), preset="tiny", vocab_size=1000, keep_last=3)
    params = parameter_count(planned_model_config(cfg))
    assert params == parameter_count(preset("tiny", src_vocab_size=1000, tgt_vocab_size=1000))
    assert launch.needed_bytes(cfg) == rp.disk_needed(params, cfg.keep_last + 2)
    assert rp.disk_needed(params, 2) - rp.disk_needed(params, 1) == rp.CHECKPOINT_BYTES_PER_PARAMETER * params
    # the trainer refuses to save with less free space than one checkpoint needs, and saves with that much
    one = rp.disk_needed(params, 1)
    monkeypatch.setattr(rp, "free_bytes", lambda path: one - 1)
    with pytest.raises(OSError, match="disk nearly full"):
        check_room(tmp_path, planned_model_config(cfg))
    monkeypatch.setattr(rp, "free_bytes", lambda path: one)
    check_room(tmp_path, planned_model_config(cfg))


def test_free_bytes_asks_the_disk_of_the_nearest_existing_folder(tmp_path):
    assert rp.free_bytes(tmp_path / "not" / "yet" / "made") == rp.free_bytes(tmp_path) > 0


def test_dev_bleu_of_a_run_checkpoint_comes_from_its_curves(tmp_path):
    from explorer.evaluation.comparison import _dev_bleu_by_step, _short

    rf.append_metrics(tmp_path, {"kind": "eval", "step": 10, "bleu": 3.5})
    rf.append_metrics(tmp_path, {"kind": "eval", "step": 20, "bleu": "n/a"})
    assert _dev_bleu_by_step(tmp_path, {}) == {10: 3.5, 20: None}
    assert _short(rp.checkpoint_dir(tmp_path / "numbers", 300)) == "numbers@300"
    assert _short(rp.shipped_root() / "numbers-en-de") == "numbers-en-de"
    assert np.isfinite(rf.read_curves(tmp_path).bleu[0])


def test_a_file_written_whole_keeps_the_old_files_permissions_or_gets_a_new_files(tmp_path):
    """mkstemp makes its temp file 0600, which the rename would hand to a user's shared result."""
    import stat
    old = tmp_path / "shared.json"
    old.write_text("{}")
    old.chmod(0o644)
    write_json_atomic(old, {"a": 1})
    assert stat.S_IMODE(old.stat().st_mode) == 0o644 and json.loads(old.read_text()) == {"a": 1}
    old.chmod(0o444)                                   # read-only: replaced (the folder is writable), still read-only
    write_json_atomic(old, {"a": 2})
    assert stat.S_IMODE(old.stat().st_mode) == 0o444
    mask = os.umask(0o027)
    try:
        write_json_atomic(tmp_path / "new.json", {})
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640          # 0666 less the umask
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]            # no temp file left


def test_the_runs_list_skips_folders_that_hold_no_run(tmp_path):
    """The analyses' folders and the poisoned-pairs demonstration's folder were listed as runs of unknown state."""
    (tmp_path / "features" / "abc").mkdir(parents=True)
    (tmp_path / "poison-demo" / "poisoned").mkdir(parents=True)
    (tmp_path / "launched").mkdir()
    (tmp_path / "launched" / rp.LOG).write_text("starting\n")              # a launch writes its log first
    (tmp_path / "damaged" / "checkpoints").mkdir(parents=True)              # a run without its status: listed
    assert sorted(j.name for j in jobs.list_jobs(tmp_path)) == ["damaged", "launched"]
