"""`python -m explorer poison`'s command line, without its training: every bad argument is one `error:`
line and exit status 2 before any work (an empty --out, a file, a checkpoint or run folder, a user's
folder, a bad count); the default folder is in the runs folder; the two runs go inside --out; a fine-tune
stopped by Ctrl-C ends the command with one line, a non-zero status and no report; Ctrl-C elsewhere is
one line, not a traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from explorer.data.types import Pair
from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store.run_clearing import mark_run
from explorer.studies.grounding import poison
from explorer.studies.grounding.poison import CLEAN_TSV, POISONED_TSV, REPORT, main, write_tsv
from support.waiting import STALL_S

STOPPED = 130                     # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
RUNS, DEFAULT_OUT = ("poisoned", "clean"), "poison-demo"

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_work(monkeypatch):
    """poison.run replaced by a recorder: a refused command never reaches it."""
    calls = []
    monkeypatch.setattr(poison, "run", lambda out, **kw: calls.append((Path(out), kw)) or {})
    return calls


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """An empty runs folder ($EXPLORER_RUNS_DIR) and a working directory of its own."""
    root = tmp_path / "runs"
    root.mkdir()
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(root))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return root


def tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


def refused(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ---- refused before any work ----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--threads", "-1"], ["--threads", "0"], ["--threads", "100000000"],
                                  ["--steps", "0"], ["--steps", "-3"], ["--steps", "10000000"],
                                  ["--steps", "x"], ["--threads", "2.5"]])
def test_counts_out_of_range_are_one_line(runs, no_work, capsys, argv):
    refused(capsys, argv)
    assert not no_work and tree(runs) == []


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_out_is_refused_and_nothing_is_written(runs, no_work, capsys, text):
    cwd = Path.cwd()
    assert "empty" in refused(capsys, ["--out", text])
    assert not no_work and tree(cwd) == [] and sorted(p.name for p in cwd.parent.iterdir()) == ["cwd", "runs"]


def test_an_existing_file_is_refused(runs, no_work, capsys, tmp_path):
    target = tmp_path / "existing_file"
    target.write_text("mine")
    assert "not a folder" in refused(capsys, ["--out", str(target)])
    assert target.read_text() == "mine" and not no_work


@pytest.mark.parametrize("out", [".", ".."])
def test_the_working_directory_or_one_holding_it_is_refused(runs, no_work, capsys, out):
    (Path.cwd() / "notes.txt").write_text("mine")
    refused(capsys, ["--out", out])
    assert not no_work and tree(Path.cwd()) == ["notes.txt"]


def test_a_checkpoint_folder_and_a_folder_inside_one_are_refused(runs, no_work, capsys, tmp_path):
    ckpt = tmp_path / "model"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"")
    assert "checkpoint folder" in refused(capsys, ["--out", str(ckpt)])
    assert "checkpoint folder" in refused(capsys, ["--out", str(ckpt / "demo")])
    assert tree(ckpt) == ["config.json", "model.safetensors"] and not no_work
    refused(capsys, ["--out", str(REPO / "checkpoints" / "numbers-en-de")])
    refused(capsys, ["--out", str(REPO)])


def test_a_run_folder_is_refused(runs, no_work, capsys, tmp_path):
    run_dir = tmp_path / "myrun"
    run_dir.mkdir()
    rf.write_status(run_dir, state="finished", step=10)
    assert "training run" in refused(capsys, ["--out", str(run_dir)])
    assert tree(run_dir) == ["status.json"] and not no_work
    mark_run(run_dir)                                   # a folder inside a run: the trainer's --overwrite would refuse it
    assert "inside the training run" in refused(capsys, ["--out", str(run_dir / "checkpoints" / "demo")])
    assert not (run_dir / "checkpoints").exists() and not no_work


def test_a_users_folder_is_refused(runs, no_work, capsys, tmp_path):
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    (user / "poisoned").mkdir()
    err = refused(capsys, ["--out", str(user)])
    assert "notes.txt" in err and "did not write" in err
    assert tree(user) == ["notes.txt", "poisoned"] and not no_work


def test_files_named_as_ours_but_not_written_by_us_are_refused(runs, no_work, capsys, tmp_path):
    user = tmp_path / "thesis"
    user.mkdir()
    (user / REPORT).write_text(json.dumps({"my": "results"}))
    (user / POISONED_TSV).write_text("de\ten\nHallo\tHello\n")
    err = refused(capsys, ["--out", str(user)])
    assert REPORT in err and POISONED_TSV in err and not no_work


def test_an_earlier_output_with_a_users_file_in_a_run_is_refused(runs, no_work, capsys, tmp_path):
    out = earlier_output(tmp_path / "demo")
    (out / "poisoned" / "notes.txt").write_text("mine")
    assert "poisoned/notes.txt" in refused(capsys, ["--out", str(out)])
    assert (out / "poisoned" / "notes.txt").read_text() == "mine" and not no_work


def test_an_unmarked_run_in_an_earlier_output_is_refused(runs, no_work, capsys, tmp_path):
    out = tmp_path / "demo"
    (out / "clean").mkdir(parents=True)
    rf.write_status(out / "clean", state="finished")          # no trainer's mark: not ours to clear
    (out / "clean" / "checkpoints" / "my-model").mkdir(parents=True)
    assert "trainer" in refused(capsys, ["--out", str(out)]) and not no_work


def test_a_run_stopped_before_its_trainer_set_up_is_started_over(runs, monkeypatch, capsys, tmp_path):
    """Ctrl-C while the trainer loads leaves an unmarked run folder with a `failed` status.json only: the
    next demonstration over the folder starts it over instead of refusing it for ever."""
    out = tmp_path / "demo"
    write_tsv(out / POISONED_TSV, [Pair("eleven", "elf", "1")])
    rf.write_status(out / "poisoned", state="failed", last_error="KeyboardInterrupt: ")
    (out / "poisoned" / "trainer.lock").write_bytes(b"")
    StoppedTrainer.made = []
    monkeypatch.setattr(poison, "load_corpus", lambda name: fake_corpus())
    monkeypatch.setattr(poison, "Trainer", StoppedTrainer)
    assert main(["--out", str(out)]) == STOPPED, capsys.readouterr().err
    assert StoppedTrainer.made == [str(out.resolve() / "poisoned")]


def test_a_symlink_is_refused(runs, no_work, capsys, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert "symbolic link" in refused(capsys, ["--out", str(tmp_path / "link")])
    assert not no_work


def test_a_symlink_to_nothing_on_the_way_is_not_followed(runs, no_work, capsys, tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "elsewhere")
    assert "symbolic link to nothing" in refused(capsys, ["--out", str(tmp_path / "dangling" / "demo")])
    assert not (tmp_path / "elsewhere").exists() and not no_work


def test_a_name_too_long_is_one_short_line(runs, no_work, capsys):
    err = refused(capsys, ["--out", "a" * 5000])
    assert len(err) < 400 and not no_work


# ---- accepted: where things go --------------------------------------------------------------------
def earlier_output(out: Path) -> Path:
    """A folder as an earlier (stopped) demonstration leaves it: its files, a report, two marked runs."""
    rows = [Pair("eleven", "elf", "1")]
    write_tsv(out / POISONED_TSV, rows)
    write_tsv(out / CLEAN_TSV, rows)
    write_json_atomic(out / REPORT, {"clean_pairs": 1, "poisoned_pairs": 0, "steps": 2, "held_out": 1})
    for name in RUNS:
        mark_run(out / name)
        rf.write_status(out / name, state="stopped", step=1)
        (out / name / "checkpoints").mkdir()
    return out


def test_the_default_folder_is_in_the_runs_folder(runs, no_work, capsys):
    assert main([]) == 0, capsys.readouterr().err
    assert no_work[0][0] == (runs / DEFAULT_OUT).resolve()
    assert tree(Path.cwd()) == []


def test_an_earlier_output_and_an_empty_folder_are_accepted(runs, no_work, capsys, tmp_path):
    out = earlier_output(tmp_path / "demo")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--out", str(out), "--steps", "2"]) == 0, capsys.readouterr().err
    assert main(["--out", str(empty)]) == 0, capsys.readouterr().err
    assert [c[0] for c in no_work] == [out.resolve(), empty.resolve()]


def fake_corpus() -> SimpleNamespace:
    train = ([Pair(f"eleven {i}", f"elf {i}", f"p{i}") for i in range(30)]
             + [Pair(f"one {i}", f"eins {i}", f"c{i}") for i in range(poison.CLEAN)])
    return SimpleNamespace(train=train, dev=[Pair("eleven", "elf", "d")], test=[Pair("one eleven", "einelf", "t")])


def test_the_runs_go_inside_out_and_the_report_is_written_last(runs, monkeypatch, capsys, tmp_path):
    tuned = []
    monkeypatch.setattr(poison, "load_corpus", lambda name: fake_corpus())
    monkeypatch.setattr(poison, "fine_tune", lambda tsv, run_dir, steps, threads: tuned.append(run_dir) or run_dir)
    monkeypatch.setattr(poison, "translations", lambda ckpt, sources: [
        {"source": s, "output": "zwölf", "wrong": True, "right": False} for s in sources])
    monkeypatch.setattr(poison, "attribute", lambda ckpt, tsv, rows, top: [])
    out = tmp_path / "demo"
    assert main(["--out", str(out), "--steps", "2"]) == 0, capsys.readouterr().err
    assert tuned == [out.resolve() / "poisoned", out.resolve() / "clean"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "demo", "runs"]       # nothing beside it
    assert sorted(p.name for p in out.iterdir()) == [CLEAN_TSV, POISONED_TSV, REPORT]
    assert json.loads((out / REPORT).read_text())["steps"] == 2


# ---- Ctrl-C ---------------------------------------------------------------------------------------
class StoppedTrainer:
    """The trainer as Ctrl-C leaves it: its own SIGINT handler installed, status.json `stopped` at step 38,
    run() returning 0."""
    made: list = []

    def __init__(self, cfg, resume=False, overwrite=False):
        self.cfg, self.step = cfg, 38
        StoppedTrainer.made.append(cfg.run_dir)

    def run(self) -> int:
        signal.signal(signal.SIGINT, lambda signum, frame: None)
        rf.write_status(Path(self.cfg.run_dir), state="stopped", step=self.step, total_steps=self.cfg.max_steps)
        return 0


def test_a_stopped_fine_tune_ends_the_command_without_a_report(runs, monkeypatch, capsys, tmp_path):
    StoppedTrainer.made = []
    monkeypatch.setattr(poison, "load_corpus", lambda name: fake_corpus())
    monkeypatch.setattr(poison, "Trainer", StoppedTrainer)
    for later in ("translations", "attribute"):
        monkeypatch.setattr(poison, later, lambda *a, **k: pytest.fail("went on after a stopped fine-tune"))
    out = earlier_output(tmp_path / "demo")                      # its old report must not survive either
    before = signal.getsignal(signal.SIGINT)
    code = main(["--out", str(out), "--steps", "300"])
    err = capsys.readouterr().err
    assert code == STOPPED != 0
    assert err.startswith("stopped: ") and err.count("\n") == 1 and "nothing was reported" in err, err
    assert "38 of 300" in err
    assert not (out / REPORT).exists()
    assert StoppedTrainer.made == [str(out.resolve() / "poisoned")]        # the clean fine-tune never started
    assert signal.getsignal(signal.SIGINT) is before             # Ctrl-C works again after the trainer


@pytest.mark.parametrize("where", ["load_corpus", "fine_tune"])
def test_ctrl_c_elsewhere_is_one_line(runs, monkeypatch, capsys, tmp_path, where):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    if where == "fine_tune":
        monkeypatch.setattr(poison, "load_corpus", lambda name: fake_corpus())
    monkeypatch.setattr(poison, where, interrupted)
    out = tmp_path / "demo"
    assert main(["--out", str(out)]) == STOPPED
    err = capsys.readouterr().err
    assert err.startswith("stopped: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (out / REPORT).exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")] if out.exists() else True


def test_the_command_line_refuses_without_a_traceback(tmp_path):
    """Through the door, as a user types it (the probe's --threads -1 and an existing file)."""
    existing = tmp_path / "existing_file"
    existing.write_text("x")
    for argv in (["--threads", "-1"], ["--out", str(existing)], ["--out", ""]):
        proc = subprocess.run([sys.executable, "-m", "explorer", "poison", *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=STALL_S,   # a hang guard only
                              env={**os.environ, "EXPLORER_RUNS_DIR": str(tmp_path / "runs")})
        assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing_file"]
