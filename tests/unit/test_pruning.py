"""Folders the app fills are kept within a count and a size (explorer.files.pruning.prune_oldest): the
oldest written go first, a spared file never; the analyses' result folders after each result the app
writes (explorer.store.run_paths.prune_analysis_folder), never a file elsewhere."""
from __future__ import annotations

import os

import pytest

from explorer.files.names import GRAPHS, HEADS
from explorer.files.pruning import prune_oldest
from explorer.store import run_paths


def write(path, size: int, age: int):
    """A file of `size` bytes last written `age` seconds ago."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    stamp = 1_700_000_000 - age
    os.utime(path, (stamp, stamp))
    return path


def test_the_oldest_go_first_until_the_count_holds(tmp_path):
    files = [write(tmp_path / f"{i}.json", 10, age=100 - i) for i in range(6)]     # 0 is the oldest
    seen = []
    deleted = prune_oldest(tmp_path.glob("*.json"), max_files=4, max_bytes=10**6, on_delete=seen.append)
    assert deleted == files[:2] == seen
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{i}.json" for i in range(2, 6)]


def test_the_size_bound_holds_and_a_spared_file_stays(tmp_path):
    big = write(tmp_path / "big.json", 500, age=50)          # the oldest, spared
    rest = [write(tmp_path / f"{i}.json", 100, age=40 - i) for i in range(4)]
    deleted = prune_oldest(tmp_path.glob("*.json"), max_files=100, max_bytes=700, spare=[big])
    assert deleted == rest[:2] and big.exists()
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 700


def test_within_bounds_nothing_goes(tmp_path):
    for i in range(3):
        write(tmp_path / f"{i}.json", 10, age=i)
    assert prune_oldest(tmp_path.glob("*.json"), 3, 30) == [] and len(list(tmp_path.iterdir())) == 3


def test_a_file_gone_meanwhile_is_skipped(tmp_path):
    gone = tmp_path / "gone.json"                            # listed, then deleted by someone else
    kept = [write(tmp_path / f"{i}.json", 10, age=10 - i) for i in range(3)]
    assert prune_oldest([gone, *kept], 2, 10**6) == kept[:1]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv(run_paths.RUNS_ENV, str(tmp_path))
    monkeypatch.setattr(run_paths, "ANALYSIS_KEEP_FILES", 3)
    return tmp_path


def test_an_analysis_folder_is_kept_within_its_bound_after_a_write(runs):
    old = [write(runs / GRAPHS / f"old{i}.json", 10, age=100 - i) for i in range(4)]
    new = write(runs / GRAPHS / "new.json", 10, age=1000)                 # just written, yet stamped oldest
    other = [write(runs / HEADS / f"h{i}.json", 10, age=i) for i in range(5)]
    assert run_paths.prune_analysis_folder(new) == old[:2]
    assert new.exists() and all(p.exists() for p in other)               # another folder: its own bound
    assert len(list((runs / GRAPHS).iterdir())) == 3


def test_a_file_outside_the_analysis_folders_prunes_nothing(runs, tmp_path_factory):
    mine = tmp_path_factory.mktemp("user")                                # a command's --out folder
    files = [write(mine / f"{i}.json", 10, age=i) for i in range(5)]
    assert run_paths.prune_analysis_folder(files[0]) == [] and all(p.exists() for p in files)
    runs_files = [write(runs / f"{i}.json", 10, age=i) for i in range(5)]  # the runs folder itself
    assert run_paths.prune_analysis_folder(runs_files[0]) == []
