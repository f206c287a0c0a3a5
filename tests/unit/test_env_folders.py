"""A folder setting ($EXPLORER_RUNS_DIR, $EXPLORER_DATA_DIR, data --data-dir) that names something that is
not a folder is one line naming the setting, not the NotADirectoryError of the first write under it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from explorer.files.settings import folder_problem
from explorer.data import DataError
from explorer.data.splits import load_corpus
from explorer.store import run_paths
from support.waiting import STALL_S

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("not a folder\n")
    return path


def test_a_folder_or_a_new_name_has_no_problem(tmp_path, a_file):
    assert folder_problem(tmp_path) is None and folder_problem(tmp_path / "new" / "deeper") is None
    assert folder_problem(a_file) == "a regular file, not a folder"
    assert folder_problem(a_file / "sub") == f"{a_file}, a part of it, is a regular file, not a folder"
    assert folder_problem(os.devnull) == "a device, FIFO or socket, not a folder"


def test_runs_dir_that_is_a_file_is_refused_naming_the_variable(monkeypatch, tmp_path, a_file):
    monkeypatch.setenv(run_paths.RUNS_ENV, str(tmp_path / "runs"))
    assert run_paths.runs_root() == (tmp_path / "runs").resolve()          # not there yet: made when written
    for bad in (a_file, a_file / "runs", os.devnull):
        monkeypatch.setenv(run_paths.RUNS_ENV, str(bad))
        with pytest.raises(run_paths.RunsDirError, match=rf"^\$EXPLORER_RUNS_DIR={bad}: .*not a folder") as caught:
            run_paths.runs_root()
        assert isinstance(caught.value, ValueError)        # what the commands print as one `error:` line


@pytest.mark.parametrize("where", ["env", "flag"])
def test_a_data_folder_that_is_a_file_is_a_data_error_naming_it(monkeypatch, tmp_path, a_file, where):
    if where == "env":
        monkeypatch.setenv("EXPLORER_DATA_DIR", os.devnull)
        with pytest.raises(DataError, match=r"^\$EXPLORER_DATA_DIR=/dev/null: a device, FIFO or socket, not a folder"):
            load_corpus("numbers")
    else:
        monkeypatch.setenv("EXPLORER_DATA_DIR", str(tmp_path / "data"))
        with pytest.raises(DataError, match=rf"^the data folder {a_file}: a regular file, not a folder"):
            load_corpus("numbers", data_dir=str(a_file))


def _command(tmp_path, *argv, **env):
    full = {**os.environ, "EXPLORER_RUNS_DIR": str(tmp_path / "runs"), "EXPLORER_DATA_DIR": str(tmp_path / "data"),
            "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, "-m", "explorer", *argv], cwd=tmp_path, env=full, capture_output=True,
                          text=True, timeout=STALL_S)


def test_the_data_command_says_one_line(tmp_path, a_file):
    for proc, said in ((_command(tmp_path, "data", "numbers", EXPLORER_DATA_DIR=os.devnull), "$EXPLORER_DATA_DIR=/dev/null"),
                       (_command(tmp_path, "data", "numbers", "--data-dir", str(a_file)), f"the data folder {a_file}")):
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {said}: "), proc.stderr


def test_grounding_states_under_a_runs_dir_that_is_a_file_says_one_line(tmp_path, a_file):
    source = tmp_path / "in.txt"
    source.write_text("uno dos\n")
    proc = _command(tmp_path, "grounding", os.path.join(ROOT, "checkpoints", "numbers-en-de"), "--input", str(source),
                    "--states", "--out", str(tmp_path / "g.json"), EXPLORER_RUNS_DIR=str(a_file))
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"error: $EXPLORER_RUNS_DIR={a_file}: a regular file, not a folder; name a folder for runs and results"]


NUMBERS = os.path.join(ROOT, "checkpoints", "numbers-en-de")


@pytest.mark.parametrize("argv", [["graph", NUMBERS, "--text", "seven"], ["features", "train", NUMBERS]])
def test_the_dictionary_commands_say_it_before_the_work(tmp_path, a_file, argv):
    """features train trained its dictionaries for minutes before the first write under the file; graph
    said it with 'python -m explorer features train ... makes them' after it, as if none were trained."""
    proc = _command(tmp_path, *argv, "--out", str(tmp_path / "out.json"), EXPLORER_RUNS_DIR=str(a_file))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: $EXPLORER_RUNS_DIR={a_file}: a regular file, not a folder; name a folder for runs and results"]
    assert not (tmp_path / "out.json").exists()
