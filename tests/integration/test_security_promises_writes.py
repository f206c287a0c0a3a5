"""docs/SECURITY.md's "What it writes": a training job started as the Train page starts it, on a
built-in corpus and with an upload kept, writes under the runs folder ($EXPLORER_RUNS_DIR) and the
corpus cache ($EXPLORER_DATA_DIR) only: nothing in the home folder, nothing in the repository it runs
from (its top level, its own runs/ and data/, checkpoints/), and in the temporary folder only the empty
cache folder torch makes there (torchinductor_<user>).
"""
from __future__ import annotations

import contextlib

import pytest

from explorer.config import TrainConfig
from explorer.store import run_paths as rp
from explorer.training import jobs, launch, uploads
from support.waiting import tree_signature, wait_until


OTHERS = {".pytest_cache", "test-artifacts"}      # what other test sessions in this checkout may add meanwhile


def tree(root) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))} if root.exists() else {}


@pytest.mark.slow
def test_a_training_job_writes_only_under_the_runs_folder_and_the_corpus_cache(tmp_path, monkeypatch):
    folders = {name: tmp_path / name for name in ("runs", "data", "home", "tmp")}
    for folder in folders.values():
        folder.mkdir()
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(folders["runs"]))
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(folders["data"]))
    monkeypatch.setenv("EXPLORER_MAX_JOBS", "1")
    for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):   # what the trainer inherits
        monkeypatch.setenv(key, str(folders["home" if key.startswith("X") or key == "HOME" else "tmp"]))
    repo = {p.name for p in rp.REPO_ROOT.iterdir()}
    kept = {name: tree(rp.REPO_ROOT / name) for name in ("checkpoints", "runs", "data")}

    upload, _ = uploads.save_upload(b"one\teins\ntwo\tzwei\nthree\tdrei\n", "mine.tsv")
    run_dir = folders["runs"] / "writes"
    cfg = TrainConfig(run_dir=str(run_dir), dataset="numbers", preset="tiny", tokenizer_type="word", max_steps=4,
                      batch_tokens=400, warmup=2, eval_every=2, save_every=2, eval_sentences=2, log_every=1,
                      threads=1)
    try:
        launch.start(cfg)
        job = wait_until(lambda: (lambda j: not j.active and j)(jobs.poll(run_dir)), "the training job",
                         progress=lambda: tree_signature(run_dir))
    finally:
        with contextlib.suppress(jobs.JobError):
            launch.stop(run_dir)
    assert job.state == "finished", (job, (run_dir / rp.LOG).read_text()[-2000:])

    assert upload.parent == folders["runs"] / rp.UPLOADS
    assert rp.checkpoint_dirs(run_dir), "the run wrote no checkpoint"
    assert (folders["data"] / "numbers" / "train.tsv").is_file()           # the corpus cache: $EXPLORER_DATA_DIR
    assert {p.name for p in folders["runs"].iterdir()} <= {"writes", rp.UPLOADS, ".launch.lock"}
    assert list(folders["home"].iterdir()) == []
    in_tmp = [p for p in folders["tmp"].rglob("*")]
    assert all(p.is_dir() and p.name.startswith("torchinductor_") and not any(p.iterdir()) for p in in_tmp), in_tmp
    new = {p.name for p in rp.REPO_ROOT.iterdir()} - repo - OTHERS
    assert not new, new
    assert {name: tree(rp.REPO_ROOT / name) for name in kept} == kept
