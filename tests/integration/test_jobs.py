"""Training jobs: real trainer processes on the numbers task (tiny, one thread), and the checks
and state inference around them on hand-made run directories.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer.training import jobs, launch, uploads
from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.checkpoint import load_checkpoint, load_trainer_state
from explorer.config import TrainConfig
from explorer.data import DataError
from explorer.training.args import parse_config
from support.train_helpers import wait_for_run
from support.training_fixtures import build_runs, hold_lock, make_tokenizer, write_run
from support.waiting import STALL_S, run_watched, tree_signature, wait_until


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("EXPLORER_MAX_JOBS", "1")
    return tmp_path


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer"
    make_tokenizer(path)
    return path


def numbers_cfg(run_dir: Path, **overrides) -> TrainConfig:
    base = dict(run_dir=str(run_dir), dataset="numbers", preset="tiny", tokenizer_type="word", max_steps=20,
                batch_tokens=400, warmup=10, lr_factor=0.5, eval_every=10, save_every=5, eval_sentences=3,
                keep_last=10, log_every=1, threads=1)
    return TrainConfig(**{**base, **overrides})


def seeded(run_dir: Path, tokenizer_dir: Path) -> Path:
    shutil.copytree(tokenizer_dir, run_dir / "tokenizer")       # the trainer reuses run_dir/tokenizer
    return run_dir


def wait(run_dir, until, what):
    return wait_for_run(run_dir, until, what)


# ---- real trainer processes -----------------------------------------------------------------------
def test_start_progress_stop_resume_sigkill_resume(root, tokenizer_dir):
    """One run through every transition (each trainer start costs seconds of torch import)."""
    run = seeded(root / "numbers-a", tokenizer_dir)
    job = launch.start(numbers_cfg(run, max_steps=40))
    assert job.state in ("starting", "running") and job.active
    with pytest.raises(jobs.JobError, match="limit is 1"):            # the one slot is taken
        launch.start(numbers_cfg(root / "numbers-b"))
    with pytest.raises(jobs.JobError, match="already exists|already running"):
        launch.start(numbers_cfg(run))
    job = wait(run, lambda j: j.state == "running" and j.step >= 5 and j.checkpoints, "progress")
    assert job.total_steps == 40 and job.pid and 0 < job.fraction < 1
    curves = rf.read_curves(run)
    assert len(curves.step) >= 5 and curves.loss[0] > 0 and curves.lr[0] > 0

    # stop: SIGTERM, the trainer saves where it is and says "stopped"
    launch.stop(run)
    job = wait(run, lambda j: not j.active, "stop")
    assert job.state == "stopped" and job.resumable and 5 <= job.step < 40 and not job.note
    assert rp.checkpoint_dirs(run)[-1].name == f"step_{job.step:06d}"          # saved where it stopped
    with pytest.raises(jobs.JobError, match="not running"):
        launch.stop(run)

    # resume, then SIGKILL mid-run: no final status, the last whole checkpoint loads, the run resumes
    stopped_at = job.step
    launch.resume(run)
    job = wait(run, lambda j: j.state == "running" and j.step >= stopped_at + 7, "the resumed run to progress")
    assert f"resumed from {run / 'checkpoints' / f'step_{stopped_at:06d}'}" in rf.log_tail(run, 200)
    os.kill(job.pid, signal.SIGKILL)
    job = wait(run, lambda j: not j.active, "the killed trainer to be seen as gone")
    assert job.state == "stopped" and "killed" in job.note and job.resumable
    last = job.checkpoints[-1]
    loaded, state = load_checkpoint(last), load_trainer_state(last)
    assert state["step"] == loaded.meta["training"]["step"] > stopped_at

    # resumed by another process that exits at once (like an app restart): the trainer lives on and
    # this process, which did not start it, finds it from the run directory alone
    resumer = run_watched([sys.executable, "-c", f"from explorer.training import launch; launch.resume({str(run)!r})"],
                          "the resuming process", cwd=rp.REPO_ROOT)
    assert resumer.returncode == 0, resumer.stderr
    assert str(run) not in jobs.LAUNCHED
    job = wait(run, lambda j: j.active, "the trainer started elsewhere to be found")
    job = wait(run, lambda j: not j.active, "the resumed run to finish")
    assert job.state == "finished" and job.step == 40, rf.log_tail(run)
    c = rf.read_curves(run)
    assert c.step.tolist() == sorted(set(c.step.tolist())) and c.step[-1] == 40 and c.eval_step[-1] == 40
    assert load_checkpoint(rp.checkpoint_dirs(run)[-1]).meta["training"]["step"] == 40


def test_a_crashing_trainer_shows_failed_with_its_error(root, tmp_path, monkeypatch):
    tiny = tmp_path / "two_pairs.tsv"
    tiny.write_text("one\teins\ntwo\tzwei\n")                  # valid TSV, too small to split into train/dev/test
    run = root / "crash"
    with pytest.raises(jobs.JobError, match="dataset refused: .*need at least 3 sentence pairs"):
        launch.start(numbers_cfg(run, dataset=str(tiny)))         # refused before launch, since it is checked
    monkeypatch.setattr(launch, "validate_tsv", lambda *args, **kwargs: None)    # what the trainer does with it
    launch.start(numbers_cfg(run, dataset=str(tiny)))
    job = wait(run, lambda j: not j.active, "the trainer to exit")
    assert job.state == "failed" and "at least 3 sentence pairs" in job.last_error
    assert not job.resumable


# ---- checks before launch --------------------------------------------------------------------------
@pytest.mark.parametrize("override, message", [
    (dict(warmup=0), "warmup must be >= 1"),
    (dict(label_smoothing=1.5), "label_smoothing"),
    (dict(preset="huge"), "unknown preset"),
    (dict(run_dir="bad name!"), "run name"),
    (dict(dataset="/no/such/file.tsv"), "no such file"),
    (dict(init_from="/no/such/checkpoint"), "cannot fine-tune"),
])
def test_invalid_settings_are_refused_with_the_reason(root, override, message):
    cfg = numbers_cfg(root / override.pop("run_dir", "r"), **override)
    with pytest.raises(jobs.JobError, match=message):
        launch.start(cfg)
    assert not any(root.iterdir())


def test_bad_dataset_file_and_full_disk_are_refused(root, tmp_path, monkeypatch):
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\teins\ntwo zwei\n")
    with pytest.raises(jobs.JobError, match="line 2"):
        launch.start(numbers_cfg(root / "r", dataset=str(bad)))
    monkeypatch.setattr(rp, "free_bytes", lambda path: 10 << 20)
    with pytest.raises(jobs.JobError, match="not enough disk space"):
        launch.start(numbers_cfg(root / "r"))
    with pytest.raises(jobs.JobError, match="GPU"):
        launch.start(numbers_cfg(root / "r"), nproc=2)


def test_an_existing_run_is_not_overwritten(root):
    write_run(root / "old", {"state": "finished"})
    with pytest.raises(jobs.JobError, match="already exists"):
        launch.start(numbers_cfg(root / "old"))


def test_upload_is_validated_and_kept_by_content_hash(root):
    path, report = uploads.save_upload(b"one\teins\ntwo\tzwei\nthree\tdrei\n", "mine.tsv")
    assert path.parent == root / "uploads" and path.read_bytes().startswith(b"one\teins") and report.pairs == 3
    assert uploads.save_upload(b"one\teins\ntwo\tzwei\nthree\tdrei\n")[0] == path
    with pytest.raises(DataError, match="line 2"):
        uploads.save_upload(b"one\teins\ntwo zwei\n", "bad.tsv")
    with pytest.raises(DataError, match="limit"):
        uploads.save_upload(b"a\tb\n" * 100, max_bytes=50)
    with pytest.raises(DataError, match="need at least 3 sentence pairs to make train/dev/test splits, got 2"):
        uploads.save_upload(b"one\teins\ntwo\tzwei\n", "two.tsv")     # training could not split it
    assert [j.name for j in jobs.list_jobs()] == []                # uploads/ is not a run


def test_command_round_trips_through_the_trainer_parser(tmp_path):
    cfg = numbers_cfg(tmp_path / "r", epochs=2.5, bf16=True, label_smoothing=0.0, init_from=None)
    argv = launch.command(cfg)
    assert argv[1:3] == ["-m", "explorer.train"]
    assert parse_config(argv[3:]) == (cfg, False)
    assert launch.command(cfg, resume=True)[-1] == "--resume"
    ddp = launch.command(cfg, nproc=2)
    assert "torch.distributed.run" in ddp and "--nproc-per-node=2" in ddp


# ---- state inference on hand-made run directories ----------------------------------------------------
def test_states_of_finished_running_failed_killed_and_damaged_runs(root):
    built = build_runs(root)
    try:
        states = {j.name: j for j in jobs.list_jobs()}
        assert {n: j.state for n, j in states.items()} == {
            "finished": "finished", "running": "running", "failed": "failed", "killed": "stopped", "damaged": "unknown"}
        assert states["running"].pid == built["holder"].pid and states["running"].fraction == pytest.approx(0.1)
        assert states["failed"].last_error == "non-finite loss (nan) at step 7"
        assert states["killed"].resumable and "killed" in states["killed"].note
        assert not states["damaged"].resumable and "status.json" in states["damaged"].note
        with pytest.raises(jobs.JobError, match="limit is 1"):          # the running run holds the one slot
            launch.start(numbers_cfg(root / "new"))
        with pytest.raises(jobs.JobError, match="cannot resume"):
            launch.resume(root / "damaged")
        with pytest.raises(jobs.JobError, match="nothing to resume"):
            launch.resume(root / "running")
        launch.stop(root / "running")                                   # SIGTERM to the lock holder
        assert built["holder"].wait(timeout=STALL_S) == -signal.SIGTERM       # a hang guard, not a clock
        assert jobs.poll(root / "running").state == "stopped"
    finally:
        built["holder"].kill()


def test_log_tail_keeps_the_latest_progress_bar_state(tmp_path):
    (tmp_path / rp.LOG).write_text("start\n 10%|#  | 1/10\r 20%|## | 2/10\r\neval step 2\n" + "x\n" * 3)
    assert rf.log_tail(tmp_path, lines=5) == " 20%|## | 2/10\neval step 2\nx\nx\nx"
    assert rf.log_tail(tmp_path / "missing") == ""


def test_lock_holder_started_elsewhere_is_seen_as_running(root):
    run = write_run(root / "other", {"state": "stopped", "step": 3, "total_steps": 9, "pid": 1})
    holder = hold_lock(run)
    try:
        job = jobs.poll(run)
        assert job.state == "starting" and job.pid == holder.pid     # lock held, status not yet fresh
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.05)
    assert jobs.poll(run).state == "stopped"


# ---- run names: a folder directly under the runs directory, nothing else --------------------------
HOSTILE_NAMES = ["../../trav-ui", "/tmp/abs-ui", ".", "..", "a/b", "../checkpoints/numbers-en-de-step150",
                 " ", "a\x00b", "x" * 65, ".hidden", "x/../trav-ui-y", "./trav-ui-dot", "y/."]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_run_names_that_leave_the_runs_directory_are_refused_and_nothing_is_created(root, tmp_path, name):
    outside = sorted(p.name for p in tmp_path.parent.iterdir())
    target = Path(os.path.normpath(str(root / name).replace("\x00", "")))
    existed = target.exists()
    with pytest.raises(jobs.JobError, match="run name") as err:
        jobs.run_dir_for(name)
    assert "letters, digits" in str(err.value)                  # the message names the rule
    with pytest.raises(jobs.JobError, match="run name"):        # a config built around the check is refused too
        launch.start(numbers_cfg(f"{root}{os.sep}{name}"))        # as a string: pathlib would drop "./" itself
    assert not any(root.iterdir())
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == outside
    assert target.exists() == existed and not (target / rp.LOG).exists()


def app_folders() -> list[str]:
    """Every folder the app's analyses write directly under the runs directory, named where each is defined."""
    from explorer.files import names
    from explorer.studies.grounding.poison_out import DEFAULT_OUT
    return [names.UPLOADS, names.HEADS, names.ALIGN, names.SEARCH, names.GRAPHS, names.GROUNDING, names.FEATURES,
            DEFAULT_OUT]


@pytest.mark.parametrize("name", app_folders())
def test_the_apps_own_folders_are_refused_as_run_names_saying_so(root, name):
    """'graphs', 'features', 'poison-demo'... were accepted: a run would have been written among the app's files."""
    with pytest.raises(jobs.JobError, match=f"^run name '{name}' is a folder the app uses for .+; choose another name$"):
        jobs.run_dir_for(name)
    with pytest.raises(jobs.JobError, match="is a folder the app uses"):
        launch.start(numbers_cfg(root / name))
    assert not any(root.iterdir())
    jobs.run_dir_for(name.upper())                                # only the folders themselves


def test_a_run_name_that_resolves_elsewhere_is_refused(root, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (root / "link").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(jobs.JobError, match="run name"):
        jobs.run_dir_for("link")
    with pytest.raises(jobs.JobError, match="run name"):
        launch.start(numbers_cfg(root / "link"))
    with pytest.raises(jobs.JobError, match="run name"):
        launch.resume(root / "link")
    assert not any(elsewhere.iterdir())


def test_a_good_run_name_is_a_folder_directly_under_the_runs_directory(root):
    assert jobs.run_dir_for(" numbers-0101_a.b ") == root / "numbers-0101_a.b"
    assert not (root / "numbers-0101_a.b").exists()             # naming creates nothing


STARTER = """
import json, pathlib, sys, time
from explorer.training import jobs, launch
from explorer.training import trainer as train  # noqa: F401  (imports done before the agreed moment)
from explorer.config import TrainConfig
cfg, meeting, me = TrainConfig(**json.loads(sys.argv[1])), pathlib.Path(sys.argv[2]), sys.argv[3]
(meeting / me).touch()                      # ready; the agreed moment is when both are (however long imports took)
while len(list(meeting.iterdir())) < 2:
    time.sleep(0.001)
try:
    print("started", launch.start(cfg).name)
except jobs.JobError as err:
    print("refused", err)
"""


@pytest.mark.slow
def test_the_job_limit_holds_across_app_processes(root, tokenizer_dir, tmp_path_factory):
    """Two app processes press Start at the same moment; with a limit of one, exactly one job runs."""
    runs = [seeded(root / f"race-{i}", tokenizer_dir) for i in (0, 1)]
    meeting = tmp_path_factory.mktemp("meeting")                   # both wait until both are ready
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, json.dumps(numbers_cfg(run, max_steps=100000).to_dict()),
                               str(meeting), run.name], cwd=rp.REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for run in runs]
    try:
        wait_until(lambda: all(p.poll() is not None for p in procs), "the two starters",
                   progress=lambda: tree_signature(meeting, *runs))
        outputs = [p.communicate()[0] for p in procs]
        started = [run for run, out in zip(runs, outputs) if out.startswith("started")]
        # the other is refused: by the limit, or, on a machine where the winner's trainer takes longer than
        # the launch wait to start, by the launch slot it still holds (either way one job runs, not two)
        assert len(started) == 1 and any("limit is 1" in o or "being started right now" in o for o in outputs), \
            outputs
        refused = next(run for run in runs if run not in started)
        assert not (refused / rp.LOG).exists()                      # the refused one launched nothing
        wait(started[0], lambda j: j.state == "running", "the started job to run")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for run in runs:
            with contextlib.suppress(jobs.JobError):
                launch.stop(run)
            jobs.wait(run, timeout=STALL_S)                        # cleanup: stop before the next test


def test_uploads_are_pruned_oldest_first_but_never_one_a_run_uses(root, monkeypatch):
    monkeypatch.setattr(uploads, "UPLOADS_KEEP_FILES", 3)
    paths = []
    for i in range(6):
        paths.append(uploads.save_upload(f"one\teins\ntwo\tzwei\nthree\tdrei {i}\n".encode())[0])
        os.utime(paths[-1], (1000 + i, 1000 + i))               # distinct ages, oldest first
        if i == 0:                                              # the oldest one trains a run
            run = write_run(root / "uses-it", {"state": "finished"})
            write_json_atomic(run / rp.CONFIG, {**rf.read_json(run / rp.CONFIG), "dataset": str(paths[0])})
    kept = sorted(p.name for p in (root / "uploads").glob("*.tsv"))
    assert paths[0].exists() and paths[-1].exists()
    assert len(kept) == 3 and not paths[1].exists() and not paths[2].exists()
    assert uploaded_names(root) <= {p.stem for p in (root / "uploads").glob("*.tsv")}   # pruned together
    monkeypatch.setattr(uploads, "UPLOADS_KEEP_BYTES", 1)          # a byte bound: all but the used and the new
    newest = uploads.save_upload(b"four\tvier\nfive\tfuenf\nsix\tsechs\n")[0]
    assert sorted((root / "uploads").glob("*.tsv")) == sorted([paths[0], newest])
    assert uploaded_names(root) <= {paths[0].stem, newest.stem}


def uploaded_names(root) -> set[str]:
    """The uploads whose original file name is kept beside them (<hash>.name)."""
    return {p.stem for p in (root / "uploads").glob("*.name")}
