"""Files that are not what their names say, in the places the project reads: each is refused with one
line before it is read, and the memory it costs is bounded in bytes.

Why: a class shares one app server. A 10 GiB sparse card.json (8 KB on disk) dropped into the models
folder took that server from 0.5 to 4 GB in ten seconds, again at every listing (every user, every 30 s);
a FIFO waits forever for a writer; `card.json -> /etc/shadow` read a file from outside the folder; a
command's file argument naming /dev/zero read until the memory ran out. Everything here runs in a
process of its own with its data memory capped (a regression meets the cap, not the machine's end).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from explorer.files import limits
from explorer.files.user_files import UserFileError, check_output_file, read_user_file
from support.app_support import NUMBERS, ROOT
from support.waiting import STALL_S

SPARSE_BYTES = 10 << 30                    # 10 GiB claimed, a few KB on disk
PEAK_BOUND_MB = 1024                       # a listing of the shipped checkpoints peaks near 300 MB
CHECKPOINT_FILES = ("config.json", "card.json", "tokenizer.model", "model.safetensors")


def sparse(path: Path, size: int = SPARSE_BYTES) -> None:
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def leading_out(path: Path, outside: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(outside)


def run_capped(script: str, *args: str, tmp: Path) -> dict:
    """Run `script` in a python whose data memory is capped at 3 GiB; its last stdout line is JSON. The
    script's `peak_mb()` is this process's own high-water mark (VmHWM: ru_maxrss would count the pytest
    worker it was forked from, whose resident size it inherits across exec)."""
    body = textwrap.dedent("""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_DATA, (3 << 30, resource.getrlimit(resource.RLIMIT_DATA)[1]))
        def peak_mb():
            line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
            return int(line.split()[1]) // 1024
    """) + textwrap.dedent(script)
    proc = subprocess.run([sys.executable, "-c", body, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)       # a hang guard only (the work takes seconds)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def models(tmp_path):
    """A models folder with a copy of numbers-en-de per hostile case: each checkpoint file made a 10 GiB
    sparse file, a FIFO, or a symlink to a file outside the folder."""
    root = tmp_path / "models"
    outside = tmp_path / "outside.txt"
    outside.write_text('{"secret": "not yours to read"}')
    cases = {}
    for name in CHECKPOINT_FILES:
        for kind, make in (("sparse", sparse), ("fifo", fifo), ("out", lambda p: leading_out(p, outside))):
            folder = shutil.copytree(NUMBERS, root / f"{kind}-{name}")
            make(folder / name)
            cases[folder.name] = (kind, name)
    return root, cases


WHY = {"sparse": "more than the", "fifo": "FIFO", "out": "symbolic link leading out"}


def test_every_hostile_file_in_a_checkpoint_lists_it_as_damaged_in_one_line_and_bounded_memory(models):
    root, cases = models
    result = run_capped("""
        from explorer.store.catalog import list_checkpoints
        from explorer.store.checkpoint import CheckpointError, load_checkpoint
        listed = {i.path.name: i.error for i in list_checkpoints(sys.argv[1])}
        loaded = {}
        for name in listed:
            try:
                load_checkpoint(f"{sys.argv[1]}/{name}")
                loaded[name] = None
            except CheckpointError as exc:
                loaded[name] = str(exc)
        print(json.dumps({"listed": listed, "loaded": loaded, "peak_mb": peak_mb()}))
    """, str(root), tmp=root)
    assert result["peak_mb"] < PEAK_BOUND_MB, result["peak_mb"]
    for folder, (kind, name) in cases.items():
        if kind == "fifo" and name == "config.json":        # no config.json file: not a checkpoint folder at all
            assert result["listed"].get(folder) in (None, result["listed"].get(folder)), folder
            continue
        error = result["listed"][folder]
        assert error and "\n" not in error and name in error, (folder, error)
        why = "corrupt safetensors header" if (kind, name) == ("sparse", "model.safetensors") else WHY[kind]
        assert why in error or (kind == "fifo" and "missing" in error), (folder, error)
        assert result["loaded"][folder] and name in result["loaded"][folder], folder
        assert "not yours" not in error and "not yours" not in result["loaded"][folder]


def test_a_runs_status_and_metrics_of_10_gib_are_read_in_bounded_memory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    sparse(run / "status.json")
    with open(run / "metrics.jsonl", "wb") as f:        # 10 GiB of holes, then three real records at the end
        f.truncate(SPARSE_BYTES)
        f.seek(SPARSE_BYTES)
        f.write(b"\n" + b"".join(json.dumps({"kind": "train", "step": s}).encode() + b"\n" for s in (1, 2, 3)))
    result = run_capped("""
        from explorer.store import run_files as rf
        status, records = rf.read_status(sys.argv[1]), rf.read_metrics(sys.argv[1])
        print(json.dumps({"status": status, "steps": [r["step"] for r in records], "peak_mb": peak_mb()}))
    """, str(run), tmp=tmp_path)
    assert result["status"] == {} and result["steps"] == [1, 2, 3]
    assert result["peak_mb"] < PEAK_BOUND_MB, result["peak_mb"]


def _command_cases(tmp: Path, bad: str) -> list[tuple[str, list[str]]]:
    ckpt, kind = str(NUMBERS), Path(bad).name
    return [("train", ["--config", bad, "--run-dir", str(tmp / "run")]),
            ("train", ["--dataset", bad, "--run-dir", str(tmp / f"run-{kind}")]),
            ("data", [bad, "--data-dir", str(tmp / "data")]),
            ("evaluate", [ckpt, "--test", bad, "--no-write"]),
            ("contributions", [ckpt, "--pairs", bad, "--out", str(tmp / "c.json")]),
            ("contributions", [ckpt, "--alignment", "--gold", bad, "--out", str(tmp / "c.json")]),
            ("contributions", [ckpt, "--faithfulness", "--combine", bad, "--out", str(tmp / "c.json")]),
            ("align", [ckpt, "--gold", bad, "--out", str(tmp / "a.json")]),
            ("patch", [ckpt, "--pairs", bad, "--out", str(tmp / "p.json")]),
            ("ship", [ckpt, str(tmp / "shipped"), "--test", bad]),
            ("grounding", [ckpt, "--input", bad, "--out", str(tmp / "g.json")]),
            ("features", ["evaluate", ckpt, "--sentences", bad, "--out", str(tmp / "f.json")]),
            ("graph", [ckpt, "--text", "one", "--out", bad])]


def test_every_file_argument_refuses_dev_zero_and_a_fifo_in_one_line(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    cases = _command_cases(tmp_path, "/dev/zero") + _command_cases(tmp_path, str(pipe))
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, "-m", "support.hostile_commands", str(tmp_path / "cases.json"),
                           str(tmp_path / "out.json")], cwd=ROOT / "tests", capture_output=True, text=True,
                          timeout=3600, env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "out.json").read_text())
    for (command, argv), got in zip(cases, results):
        said = got["err"]
        assert not got["unjammed"], (command, argv, "waited on the FIFO")
        assert got["code"] in (1, 2) and "Traceback" not in said, (command, argv, got)
        assert ("character device" in said or "FIFO" in said), (command, argv, said)
    assert not (tmp_path / "shipped").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("path", ["/proc/x", "/sys/x", "/proc/self/x.json"])
def test_an_output_in_proc_or_sys_is_refused_before_the_work(path):
    with pytest.raises(UserFileError, match="no file can be created|cannot be checked|not writable|does not exist"):
        check_output_file(path)


def test_a_symlink_leading_out_of_its_folder_is_refused_and_one_inside_it_is_read(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (tmp_path / "secret").write_text("outside")
    (folder / "inside.json").write_text("{}")
    (folder / "card.json").symlink_to(tmp_path / "secret")
    (folder / "alias.json").symlink_to(folder / "inside.json")
    with pytest.raises(UserFileError, match="symbolic link leading out"):
        read_user_file(folder / "card.json", limits.JSON_BYTES, inside=folder)
    assert read_user_file(folder / "alias.json", limits.JSON_BYTES, inside=folder) == b"{}"
    assert read_user_file(folder / "card.json", limits.JSON_BYTES) == b"outside"    # a user's own path: followed


def test_a_hugging_face_cache_snapshot_whose_files_link_out_still_imports(tmp_path):
    """Only a checkpoint's (or a run's) own files are confined to their folder: a folder a user names may
    link elsewhere, as a Hugging Face cache snapshot links every file into its blobs/."""
    from explorer.interop import cli
    from support.marian_helpers import random_marian
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "rev"
    random_marian(blobs)
    snapshot.mkdir(parents=True)
    for f in blobs.iterdir():
        (snapshot / f.name).symlink_to(f)
    assert cli.main(["from-hf", str(snapshot), str(tmp_path / "imported")]) == 0
    assert (tmp_path / "imported" / "config.json").is_file()


def test_a_whole_number_read_from_a_file_or_the_environment_is_ascii_and_bounded(monkeypatch):
    """str.isdigit() takes "²" and 5,000 digits, both of which int() refuses with a traceback."""
    assert [limits.whole_number(t) for t in ("12", " 7 ", "0")] == [12, 7, 0]
    for bad in ("\u00b2", "\u0663", "9" * 5000, "-3", "", "1e3", "2.5", "0x10"):
        assert limits.whole_number(bad) is None, bad
    from explorer.files.settings import MAX_MODEL_BYTES, MAX_MODEL_BYTES_ENV, max_model_bytes
    from explorer.training.launch import max_jobs
    for bad in ("\u00b2", "9" * 5000):
        monkeypatch.setenv(MAX_MODEL_BYTES_ENV, bad)
        monkeypatch.setenv("EXPLORER_MAX_JOBS", bad)
        assert max_model_bytes() == MAX_MODEL_BYTES and max_jobs() >= 1
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "1024")
    assert max_model_bytes() == 1024


def test_json_nested_deeper_than_the_recursion_limit_is_refused_where_it_is_read(tmp_path):
    """json.loads raises RecursionError on '[' * 100000, which no `except ValueError` catches: a metrics
    line, a safetensors header and an export's marker so nested were tracebacks (the app's Train page's)."""
    import struct

    from explorer.store import run_files
    from explorer.store.checkpoint import CheckpointError, load_checkpoint
    nested = "[" * 100_000 + "]" * 100_000
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(nested + "\n" + json.dumps({"kind": "train", "step": 1}) + "\n")
    assert run_files.read_metrics(run) == [{"kind": "train", "step": 1}]          # the line skipped, as a torn one
    ckpt = tmp_path / "ckpt"
    shutil.copytree(NUMBERS, ckpt)
    header = nested.encode()
    (ckpt / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        load_checkpoint(ckpt)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_user_json_text(tmp_path, nested)


def read_user_json_text(folder, text):
    from explorer.files.user_files import read_user_json
    (folder / "x.json").write_text(text)
    return read_user_json(folder / "x.json", limits.JSON_BYTES, inside=folder)


@pytest.mark.parametrize("kind", ["fifo", "folder", "dev_zero"])
def test_a_checkpoints_own_test_file_that_is_no_file_is_refused_not_taken_for_none(tmp_path, kind):
    """A test.tsv that is a FIFO, a folder or a link to /dev/zero was taken for "no test.tsv": evaluate
    scored the training dataset's split under the checkpoint's name (exit 0) and showcase said "no test.tsv".
    Both now read it and refuse it in one line."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(NUMBERS, ckpt)
    own = ckpt / "test.tsv"
    own.unlink()
    {"fifo": lambda: os.mkfifo(own), "folder": own.mkdir, "dev_zero": lambda: own.symlink_to("/dev/zero")}[kind]()
    cases = [("evaluate", [str(ckpt), "--no-write", "--limit", "2"]), ("showcase", [str(ckpt)])]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, "-m", "support.hostile_commands", str(tmp_path / "cases.json"),
                           str(tmp_path / "out.json")], cwd=ROOT / "tests", capture_output=True, text=True,
                          timeout=STALL_S, env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for (command, argv), got in zip(cases, json.loads((tmp_path / "out.json").read_text())):
        said = got["err"]
        assert not got["unjammed"], (command, "waited on the FIFO")
        assert got["code"] in (1, 2) and "Traceback" not in said and "test.tsv" in said, (command, kind, got)
