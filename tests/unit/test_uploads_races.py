"""The uploads folder shared by every session: an upload that another session's upload prunes at the wrong
moment is saved again, not an exception on the Train page; a name left without its upload is pruned; and the
upload of a run still starting (its trainer writes train_config.json only at the end of its setup) is spared,
by what its launch wrote into train.log."""
from __future__ import annotations

import json
import os
import time

import pytest

from explorer.config import TrainConfig
from explorer.store import run_paths as rp
from explorer.training import jobs, launch, uploads

PAIRS = b"one\teins\ntwo\tzwei\nthree\tdrei\n"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(uploads, "UPLOADS_KEEP_FILES", 1)        # the folder at its bound ...
    monkeypatch.setattr(uploads, "UPLOADS_RECENT_FILES", 0)      # ... and no upload among the newest spared
    return tmp_path


def test_an_upload_pruned_between_its_check_and_its_touch_is_saved_again(root, monkeypatch):
    path, _ = uploads.save_upload(PAIRS, "mine.tsv")
    real_utime = os.utime

    def pruned_first(target, *args, **kwargs):                   # another session's prune wins the race
        if str(target) == str(path):
            os.unlink(target)
        return real_utime(target, *args, **kwargs)

    monkeypatch.setattr(os, "utime", pruned_first)
    again, report = uploads.save_upload(PAIRS, "mine.tsv")
    assert again == path and path.read_bytes() == PAIRS and report.pairs == 3
    assert rp.dataset_label(str(path)) == "mine.tsv"


def test_a_name_left_without_its_upload_is_pruned(root):
    mine, _ = uploads.save_upload(PAIRS, "mine.tsv")
    mine.unlink()                        # pruned by another session while this session wrote its name
    theirs, _ = uploads.save_upload(PAIRS + b"four\tvier\n", "theirs.tsv")
    assert sorted(p.name for p in (root / rp.UPLOADS).iterdir()) == sorted(
        [theirs.name, rp.upload_name_file(theirs).name])


def starting_run(root, dataset: str, status: dict | None = None):
    """A run launched on `dataset` whose trainer has not yet written train_config.json (its setup)."""
    run = root / "starting"
    run.mkdir()
    argv = launch.command(TrainConfig(run_dir=str(run), dataset=dataset, preset="tiny"))
    (run / rp.LOG).write_text(jobs.launch_line(argv) + "building the tokenizer ...\n")
    if status is not None:
        (run / rp.STATUS).write_text(json.dumps(status))
    return run


def test_the_upload_of_a_run_still_starting_is_not_pruned(root):
    mine, _ = uploads.save_upload(PAIRS, "mine.tsv")
    os.utime(mine, (time.time() - 3600,) * 2)
    run = starting_run(root, str(mine))
    assert jobs.poll(run).active or jobs.poll(run).state == "unknown"
    uploads.save_upload(PAIRS + b"four\tvier\n", "theirs.tsv")        # another session uploads
    assert mine.is_file()


def test_a_launch_line_gives_back_a_dataset_path_with_spaces_and_quotes(root):
    odd = str(root / "my data's \"best\" file.tsv")
    run = starting_run(root, odd)
    assert jobs.launched_dataset(run) == odd


def test_the_upload_of_a_run_that_failed_before_writing_its_config_is_no_longer_kept(root):
    mine, _ = uploads.save_upload(PAIRS, "mine.tsv")
    os.utime(mine, (time.time() - 3600,) * 2)
    starting_run(root, str(mine), status={"state": "failed", "last_error": "dataset refused"})
    uploads.save_upload(PAIRS + b"four\tvier\n", "theirs.tsv")
    assert not mine.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device every write fails on")
def test_a_launch_whose_log_the_disk_cannot_hold_is_refused_in_words(root):
    run = root / "full"
    run.mkdir()
    (run / rp.LOG).symlink_to("/dev/full")             # every write there fails as on a full disk
    cfg = TrainConfig(run_dir=str(run), dataset="numbers", preset="tiny")
    with pytest.raises(jobs.JobError, match="the trainer could not be started: .* cannot be written "
                                            r"\(the server's disk is full\)"):
        launch._launch(cfg, launch.command(cfg), run)
    assert str(run) not in jobs.LAUNCHED
