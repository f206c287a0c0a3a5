"""Commands that remove or replace folders touch only what the project provably wrote.

Why: `train --overwrite` removed any `checkpoints/` and `tokenizer/` folder in whatever --run-dir named
(a project folder with the user's own models in it: gone, rc 0); `ship` replaced any checkpoint folder
whole, with the user's notes and plots in it, and copied `--test /dev/zero` until the disk was full;
`convert from-hf` removed and renamed hidden siblings that only looked like its debris; a writer killed
mid-write left its temp file beside the output for ever.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from explorer import train
from explorer.files.atomic import write_json_atomic
from explorer.files.names import OUTPUT_MARKER, PARTIAL, RUN_MARKER
from explorer.store import ship
from explorer.store.checkpoint import load_checkpoint
from explorer.store.run_clearing import RunRefused, clear_run, clearing_plan, mark_run
from support.app_support import NUMBERS


@pytest.fixture
def file_size_cap():
    """Files this process writes stop at 64 MiB (EFBIG, not the signal that would end the test run) while
    the test runs: a regression that copies /dev/zero meets the cap, not a full disk."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, hard))
    yield
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# ---- train --overwrite ----------------------------------------------------------------------------
def users_project(root: Path) -> Path:
    (root / "checkpoints" / "my-old-model").mkdir(parents=True)
    (root / "checkpoints" / "my-old-model" / "weights.bin").write_bytes(b"years of work")
    (root / "tokenizer").mkdir()
    (root / "tokenizer" / "vocab.txt").write_text("mine")
    (root / "status.json").write_text('{"project": "thesis"}')
    return root


TRAIN = ["--dataset", "numbers", "--preset", "tiny", "--tokenizer-type", "word", "--max-steps", "2",
         "--threads", "1", "--save-every", "0", "--eval-every", "0"]


def test_train_overwrite_in_a_users_folder_removes_nothing_and_says_why(tmp_path, capsys):
    proj = users_project(tmp_path / "proj")
    before = snapshot(proj)
    assert train.main([*TRAIN, "--run-dir", str(proj), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "not written by this project's trainer" in err and "--overwrite" not in err.split("error:")[-1]
    assert snapshot(proj) == before


def test_the_refusal_without_overwrite_does_not_recommend_it_for_a_users_folder(tmp_path, capsys):
    proj = users_project(tmp_path / "proj")
    assert train.main([*TRAIN, "--run-dir", str(proj)]) == 2
    err = capsys.readouterr().err
    assert "choose a new --run-dir" in err and "--overwrite" not in err


def test_train_refuses_a_file_or_a_folder_of_the_users_own_files_as_its_run_dir(tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    assert train.main([*TRAIN, "--run-dir", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err and afile.read_text() == "mine\n"
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.txt").write_text("mine\n")
    assert train.main([*TRAIN, "--run-dir", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a training run's (a.txt)" in err[0]
    assert [p.name for p in folder.iterdir()] == ["a.txt"]


def fake_run(run_dir: Path) -> Path:
    """A run as the trainer leaves it: its mark, step checkpoints, the tokenizer, status, metrics, config."""
    mark_run(run_dir)
    for step in (10, 20):
        d = run_dir / "checkpoints" / f"step_{step:06d}"
        d.mkdir(parents=True)
        (d / "config.json").write_text('{"format_version": 1}')
        (d / "model.safetensors").write_bytes(b"")
    (run_dir / "checkpoints" / f".step_000030.tmp-{dead_pid()}-0badc0de").mkdir()
    (run_dir / "tokenizer").mkdir()
    (run_dir / "tokenizer" / "tokenizer.model").write_bytes(b"spm")
    for name in ("status.json", "metrics.jsonl", "train_config.json"):
        (run_dir / name).write_text("{}")
    (run_dir / "train.log").write_text("kept\n")
    return run_dir


def test_clearing_a_run_removes_exactly_what_the_trainer_wrote(tmp_path):
    run = fake_run(tmp_path / "run")
    clear_run(run)
    assert sorted(p.name for p in run.iterdir()) == [RUN_MARKER, "train.log"]


@pytest.mark.parametrize("foreign", ["checkpoints/my-model/w.bin", "checkpoints/step_000010/notes.txt",
                                     "tokenizer/vocab.txt", "checkpoints/step_000040/sub/x"])
def test_one_foreign_entry_in_a_run_refuses_the_whole_clearing(tmp_path, foreign):
    run = fake_run(tmp_path / "run")
    (run / foreign).parent.mkdir(parents=True, exist_ok=True)
    (run / foreign).write_text("the user's")
    before = snapshot(run)
    with pytest.raises(RunRefused, match="did not write"):
        clear_run(run)
    assert snapshot(run) == before


def test_a_symlinked_checkpoints_folder_is_not_cleared_through(tmp_path):
    run = fake_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(run / "checkpoints", elsewhere)
    (run / "checkpoints").symlink_to(elsewhere)
    with pytest.raises(RunRefused):
        clearing_plan(run)
    assert (elsewhere / "step_000010" / "config.json").is_file()


# ---- ship -------------------------------------------------------------------------------------------
def users_checkpoint(dst: Path) -> Path:
    shutil.copytree(NUMBERS, dst)
    (dst / "notes.txt").write_text("what I found")
    (dst / "plots").mkdir()
    (dst / "plots" / "curve.png").write_bytes(b"png")
    return dst


@pytest.mark.parametrize("flags", [[], ["--overwrite"]])
def test_ship_refuses_a_folder_holding_files_it_did_not_write(tmp_path, capsys, flags):
    dst = users_checkpoint(tmp_path / "mine")
    before = snapshot(dst)
    assert ship.main([str(NUMBERS), str(dst), *flags]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert snapshot(dst) == before


@pytest.mark.parametrize("test_file", ["/dev/zero", "fifo", "not-pairs"])
def test_ship_checks_the_test_file_before_the_destination_is_touched(tmp_path, capsys, test_file, file_size_cap):
    if test_file == "fifo":
        test_file = str(tmp_path / "pipe")
        os.mkfifo(test_file)
    elif test_file == "not-pairs":
        test_file = str(tmp_path / "bad.tsv")
        Path(test_file).write_text("one column only\n")
    dst = tmp_path / "out"
    assert ship.main([str(NUMBERS), str(dst), "--test", test_file]) == 2
    assert "error:" in capsys.readouterr().err
    assert not dst.exists() and not list(tmp_path.glob(".out.*"))


def test_ship_writes_a_whole_checkpoint_with_its_test_split_and_may_replace_its_own(tmp_path):
    dst = tmp_path / "shipped"
    assert ship.main([str(NUMBERS), str(dst), "--test", str(NUMBERS / "test.tsv"), "--name", "n"]) == 0
    assert (dst / "test.tsv").read_bytes() == (NUMBERS / "test.tsv").read_bytes()
    marker = json.loads((dst / OUTPUT_MARKER).read_text())
    assert "test.tsv" in marker["files"] and load_checkpoint(dst).name == "n"
    assert ship.main([str(NUMBERS), str(dst), "--name", "again"]) == 0           # its own output, unchanged
    assert load_checkpoint(dst).name == "again" and not (dst / "test.tsv").exists()


# ---- hidden siblings that only look like debris ------------------------------------------------------
def lookalikes(parent: Path, name: str) -> dict:
    """Hidden folders of a user's beside `name`, each named like a write's debris but not made by one."""
    made = {}
    for sibling, files in ((f".{name}.tmp-foo", ["a.txt"]),
                           (f".{name}.tmp-{dead_pid()}-deadbeef", ["mine.txt"]),       # no partial mark
                           (f".{name}.old-a", ["config.json"]),
                           (f".{name}.old-{dead_pid()}-0badc0de", ["config.json"]),    # no output marker
                           (f".{name}.old-{dead_pid()}-feedbeef", ["config.json"])):
        for f in files:
            (parent / sibling).mkdir(parents=True, exist_ok=True)
            (parent / sibling / f).write_text("{}")
        made[sibling] = files
    return made


@pytest.mark.parametrize("target_exists", [True, False])
def test_convert_leaves_lookalike_siblings_alone(tmp_path, target_exists):
    from explorer.interop import cli
    from support.marian_helpers import random_marian
    random_marian(tmp_path / "hf")
    out_parent = tmp_path / "models"
    out_parent.mkdir()
    lookalikes(out_parent, "OUT")
    if target_exists:
        (out_parent / "OUT").mkdir()
        (out_parent / "OUT" / "thesis.tex").write_text("mine")
    before = snapshot(out_parent)
    code = cli.main(["from-hf", str(tmp_path / "hf"), str(out_parent / "OUT")])
    after = snapshot(out_parent)
    if target_exists:
        assert code == 2 and after == before
    else:
        assert code == 0 and load_checkpoint(out_parent / "OUT")
        assert {k: v for k, v in after.items() if not k.startswith("OUT")} == \
            {k: v for k, v in before.items() if not k.startswith("OUT")}


def test_recovery_still_finishes_its_own_interrupted_write(tmp_path):
    """What the strict names must not lose: an aside copy of our own output is renamed back, a partial
    build of a dead writer removed."""
    from explorer.files.atomic import recover
    target = tmp_path / "OUT"
    aside = tmp_path / f".OUT.old-{dead_pid()}-0badc0de"
    aside.mkdir()
    (aside / OUTPUT_MARKER).write_text("{}")
    partial = tmp_path / f".OUT.tmp-{dead_pid()}-feedbeef"
    partial.mkdir()
    (partial / PARTIAL).write_text("")
    recover(target, OUTPUT_MARKER)
    assert (target / OUTPUT_MARKER).is_file() and not aside.exists() and not partial.exists()


# ---- a writer killed mid-write ----------------------------------------------------------------------
def test_the_next_write_sweeps_the_temp_file_a_killed_writer_left_and_nothing_else(tmp_path):
    out = tmp_path / "result.json"
    dead = tmp_path / f".result.json.{dead_pid()}-abcd1234.tmp"
    live = tmp_path / f".result.json.{os.getppid()}-abcd1234.tmp"                   # a live writer's
    mine = tmp_path / ".result.json.my-notes.tmp"
    for f in (dead, live, mine):
        f.write_text("partial")
    write_json_atomic(out, {"a": 1})
    assert json.loads(out.read_text()) == {"a": 1}
    assert not dead.exists() and live.exists() and mine.exists()


def test_a_run_stopped_before_its_setup_may_be_started_again_and_a_temp_file_is_the_trainers(tmp_path, capsys):
    """Ctrl-C while the trainer loads leaves status.json and trainer.lock without the mark; starting there
    again must not be refused for ever. A temp file of an atomic write a killed trainer left is its own."""
    from explorer.store import run_files as rf
    from explorer.training.args import check_run_folder
    run = tmp_path / "run"
    run.mkdir()
    rf.write_status(run, state="failed", last_error="KeyboardInterrupt")
    (run / "trainer.lock").write_text("")
    (run / f".status.json.{dead_pid()}-abcdefgh.tmp").write_text("{")
    check_run_folder(run, resume=False)
    assert not (run / "status.json").exists()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="notes.txt"):
        check_run_folder(run, resume=False)
    check_run_folder(run, resume=False, config=str(run / "notes.txt"))     # the run's own --config may wait there


# ---- nothing lands inside a model folder, or among the shipped checkpoints ---------------------------
def a_model(folder: Path) -> Path:
    """A folder the catalog takes for a model: config.json beside model.safetensors."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_ship_convert_train_and_data_write_nothing_inside_another_model_folder(tmp_path, capsys, monkeypatch):
    """The analysis commands refused --out inside a model folder, but `ship`, `convert`, `train --run-dir`
    and `data --data-dir` wrote a checkpoint, a run or a corpus inside one (another than their input)."""
    from explorer.data.__main__ import main as data_main
    from explorer.store.output_dirs import OutputRefused, check_output_dir
    from explorer.training.args import parse_command

    other = a_model(tmp_path / "other")
    before = snapshot(other)
    assert ship.main([str(NUMBERS), str(other / "shipped")]) == 2
    assert "inside the model folder" in capsys.readouterr().err
    with pytest.raises(OutputRefused, match="inside the model folder"):
        check_output_dir(other / "deep" / "hf", "explorer convert to-hf")
    with pytest.raises(ValueError, match="inside the model folder"):
        parse_command(["--run-dir", str(other / "run"), "--dataset", "numbers", "--preset", "tiny"])
    assert data_main(["numbers", "--data-dir", str(other / "data")]) == 2
    assert "inside the model folder" in capsys.readouterr().err
    assert snapshot(other) == before
    check_output_dir(tmp_path / "beside", "explorer convert to-hf")      # beside it: allowed


@pytest.mark.parametrize("command", ["lens", "contributions"])
def test_an_analysis_writes_nothing_among_the_shipped_checkpoints(command, capsys):
    """`lens --out checkpoints/grounding/<index>.json.gz` replaced the shipped training-word index with its
    JSON (exit 0), and the grounding verdict then failed on it: the shipped folder is no place for results."""
    from explorer.__main__ import main
    from explorer.store.run_paths import shipped_root

    target = shipped_root() / "grounding" / "written-by-a-test.json"
    before = sorted(p.name for p in target.parent.iterdir()) if target.parent.is_dir() else None
    try:
        assert main([command, str(NUMBERS), "--out", str(target)]) == 2
        said = capsys.readouterr().err
        assert "inside the shipped checkpoints folder" in said and not target.exists(), said
        assert (sorted(p.name for p in target.parent.iterdir()) if target.parent.is_dir() else None) == before
    finally:
        target.unlink(missing_ok=True)                   # a regression's write does not stay in the checkout


@pytest.mark.parametrize("command", ["lens", "contributions"])
def test_an_analysis_writes_nothing_into_the_apps_stores_or_a_run(command, tmp_path, monkeypatch, capsys):
    """`graph --out <runs>/features/<sha>/<site>/trained/cfg.json` replaced the dictionary it had just read, and
    `features evaluate --out .../sae_weights.safetensors` damaged one: the runs folder's stores and a training
    run's folder (its status.json, its curves) are no place for results, by name or through a symlink."""
    from explorer.__main__ import main
    from explorer.files.names import RUN_MARKER
    from explorer.store.run_paths import RUNS_ENV

    runs = tmp_path / "runs"
    store = runs / "features" / "ab" / "encoder.layers.0.ffn" / "trained"
    store.mkdir(parents=True)
    (store / "cfg.json").write_text("{}")
    run = runs / "my-run"
    run.mkdir()
    (run / "status.json").write_text('{"state": "done"}')
    marked = tmp_path / "elsewhere" / "run"                        # a run outside the runs folder: its mark
    marked.mkdir(parents=True)
    (marked / RUN_MARKER).write_text("{}")
    (tmp_path / "link").symlink_to(store)
    monkeypatch.setenv(RUNS_ENV, str(runs))
    for target, said in ((store / "cfg.json", "the app's features folder"), (run / "status.json", "the training run"),
                         (marked / "curves" / "out.json", "the training run"),
                         (tmp_path / "link" / "cfg.json", "the app's features folder"),
                         (runs / "poison-demo" / "report.json", "the app's poison-demo folder")):
        before = target.read_bytes() if target.is_file() else None
        assert main([command, str(NUMBERS), "--out", str(target)]) == 2
        err = capsys.readouterr().err
        assert said in err and "write results outside it" in err and "\n" not in err.strip(), err
        assert (target.read_bytes() if target.is_file() else None) == before
    from explorer.store.output_dirs import in_app_store
    (runs / "results").mkdir()
    assert in_app_store(runs / "here.json") is None and in_app_store(runs / "results" / "lens.json") is None
    assert in_app_store(tmp_path / "elsewhere" / "lens.json") is None            # beside the run: fine
    # a corpus built in the data folder: `graph --out <data>/numbers/train.tsv` replaced the training pairs
    from explorer.data.splits import DATA_ENV
    corpus = tmp_path / "data" / "numbers"
    corpus.mkdir(parents=True)
    (corpus / "train.tsv").write_text("one\teins\n")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    assert main([command, str(NUMBERS), "--out", str(corpus / "train.tsv")]) == 2
    err = capsys.readouterr().err
    assert "the corpus cache" in err and "write results outside it" in err, err
    assert (corpus / "train.tsv").read_text() == "one\teins\n"
    assert in_app_store(tmp_path / "data" / "summary.json") is None               # the folder itself: a file beside
    # a project checkout under the runs folder holds checkpoints/ (the review found every default --out refused)
    (runs / "project" / "checkpoints").mkdir(parents=True)
    assert in_app_store(runs / "project" / "head_lab.json") is None
    # a name the system will not look at is one line, not a traceback
    assert main([command, str(NUMBERS), "--out", str(tmp_path / ("a" * 300 + ".json"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_the_poison_demonstrations_default_folder_is_usable_in_a_checkout(monkeypatch):
    """`python -m explorer poison` without --out refused its own default (runs/poison-demo in this project),
    taking the project's folder, which holds the shipped checkpoints/, for a training run."""
    from explorer.store.run_paths import RUNS_ENV
    from explorer.studies.grounding import poison_out

    from explorer.store.run_paths import shipped_root

    monkeypatch.delenv(RUNS_ENV, raising=False)
    with pytest.raises(poison_out.OutRefused, match="inside the shipped checkpoints folder"):
        poison_out.check_out(str(shipped_root() / "demo"))         # its fine-tunes listed as shipped models
    out = poison_out.default_out()
    if out.exists() and any(out.iterdir()):
        pytest.skip(f"{out} holds an earlier demonstration")
    assert poison_out.check_out(str(out)) == out.resolve()


def test_the_shipped_folder_is_found_by_its_name_and_through_symlinks(tmp_path, monkeypatch):
    """A symlinked checkpoints/grounding (pointing elsewhere) resolved outside checkpoints/ and let an
    analysis replace the index through it."""
    from explorer.store import output_dirs

    shipped = tmp_path / "project" / "checkpoints"
    (tmp_path / "elsewhere").mkdir()
    shipped.mkdir(parents=True)
    (shipped / "grounding").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(output_dirs, "shipped_root", lambda: shipped)
    assert output_dirs.in_shipped_folder(shipped / "grounding" / "index.json.gz") == shipped
    (tmp_path / "link").symlink_to(shipped)
    assert output_dirs.in_shipped_folder(tmp_path / "link" / "x.json") is not None     # a link to it
    assert output_dirs.in_shipped_folder(tmp_path / "elsewhere" / "x.json") is None     # the target itself
