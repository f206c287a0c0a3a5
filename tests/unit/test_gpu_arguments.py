"""The GPU check's command line refuses what would lose a user's files, run nothing, or fail late: each
case exits 2 with one line before anything is computed; a check that checked nothing fails; its
default output folder is ignored by git; a rerun into its own earlier output replaces only that."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch

from benchmarks import gpu, gpu_output
from explorer.files.places import REPO_ROOT
from explorer.store.output_dirs import MARKER


def refused(capsys, argv: list[str]) -> str:
    """Run the check's main on argv; it must exit 2 with a one-line error and no traceback."""
    with pytest.raises(SystemExit) as exit_:
        gpu.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    message = [line for line in err.splitlines() if "error:" in line]
    assert len(message) == 1, err
    return message[0]


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any stage that starts fails the test: a refusal must come before any computation."""
    def forbidden(run):
        raise AssertionError("a stage ran")
    monkeypatch.setattr(gpu, "run_all", lambda *a, **k: forbidden(None))


def test_a_users_folder_with_a_summary_json_is_refused_and_left_alone(tmp_path, capsys, nothing_runs):
    (tmp_path / "summary.json").write_text("my notes")
    message = refused(capsys, ["--tiny", "--device", "cpu", "--out", str(tmp_path)])
    assert "summary.json" in message and "did not write" in message
    assert (tmp_path / "summary.json").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.mark.parametrize("budget", ["-1", "0", "nan", "inf", "-inf", "1e9", "soon"])
def test_a_budget_that_cannot_run_anything_is_refused(tmp_path, capsys, nothing_runs, budget):
    message = refused(capsys, ["--tiny", "--device", "cpu", "--out", str(tmp_path / "o"), f"--budget={budget}"])
    assert "--budget" in message
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv", [["--stage", "captur"], ["--only", "correctnes"],
                                  ["--only", "training", "--stage", "capture"]])
def test_a_mistyped_or_empty_selection_is_refused(tmp_path, capsys, nothing_runs, argv):
    message = refused(capsys, ["--tiny", "--device", "cpu", "--out", str(tmp_path / "o"), *argv])
    assert "--stage" in message or "--only" in message
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("where", ["file", "/dev/null", "/proc/gpu-check", "/sys/gpu-check", "under-a-file"])
def test_an_out_that_cannot_hold_the_files_is_refused_in_one_line(tmp_path, capsys, nothing_runs, where):
    (tmp_path / "file").write_text("keep")
    target = {"file": str(tmp_path / "file"), "under-a-file": str(tmp_path / "file" / "out")}.get(where, where)
    message = refused(capsys, ["--tiny", "--device", "cpu", "--out", target])
    assert "--out" in message
    assert (tmp_path / "file").read_text() == "keep"


@pytest.mark.parametrize("tokens", ["1000000000", "1e9", "0", "-5", "15"])
def test_batch_tokens_are_held_to_the_trainers_bounds(tmp_path, capsys, nothing_runs, tokens):
    message = refused(capsys, ["--tiny", "--device", "cpu", "--out", str(tmp_path / "o"), "--batch-tokens", tokens])
    assert "--batch-tokens" in message


def test_a_check_that_ran_no_comparison_says_so_and_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(gpu, "stages", lambda tiny: [gpu.Stage("training", "fine", (0, 0),
                                                               lambda run: {"ok": True, "line": "fine"})])
    out = gpu_output.prepare_out(tmp_path / "o")
    assert gpu.run_all(gpu.Run(torch.device("cpu"), tiny=True, budget=60.0, out=out)) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert "NOTHING CHECKED" in summary["verdict"] and summary["checked"] == []
    assert "correctness passed" not in capsys.readouterr().out


def test_the_default_output_folder_is_ignored_by_git():
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    target = REPO_ROOT / gpu_output.DEFAULT_OUT / "summary.json"
    done = subprocess.run(["git", "check-ignore", "-q", str(target)], cwd=REPO_ROOT)
    assert done.returncode == 0, f"{gpu_output.DEFAULT_OUT} would be left untracked in a checkout"


def test_a_rerun_replaces_only_its_own_earlier_output(tmp_path):
    out = gpu_output.prepare_out(tmp_path / "o")
    gpu_output.write_result(out, "decoding.json", {"old": True})
    gpu_output.write_result(out, "summary.json", {"old": True})
    again = gpu_output.prepare_out(tmp_path / "o")                 # its own output, unchanged: replaced
    assert sorted(p.name for p in again.iterdir()) == [MARKER]     # no stale group file beside the new ones
    gpu_output.write_result(again, "summary.json", {"new": True})
    (again / "summary.json").write_text("edited by hand")
    with pytest.raises(gpu_output.OutputRefused, match="changed since"):
        gpu_output.prepare_out(again)
    assert gpu_output.prepare_out(again, overwrite=True) == again and not (again / "summary.json").exists()
