"""The analysis commands (`python -m explorer heads`, `python -m explorer align`) check what a user types before
they load a checkpoint: an --out that is not a file to write (a device, a FIFO, a directory, a missing
folder), counts out of range, a --gold that is not a regular file or too large, a --device the machine
lacks. Each is refused at once with one line `error: ...` and exit status 2, never after the run, never
with a traceback, never by replacing a device with a JSON file, never by hanging on a FIFO. The
evaluate and train commands check --device alike."""
from __future__ import annotations

import json
import os
import stat
import threading

import pytest
import torch

from explorer.studies.align.__main__ import main as align_main
from explorer.files.user_files import UserFileError, check_output_file, read_user_file
from explorer.studies.heads.__main__ import main as heads_main
from explorer.store import checkpoint as checkpoint_store
from explorer.files.places import REPO_ROOT
from support.waiting import STALL_S

NUMBERS = str(REPO_ROOT / "checkpoints" / "numbers-en-de")
COMMANDS = {"heads": (heads_main, ["--sentences", "2", "--seeds", "0", "--points", "1"]),
            "align": (align_main, ["--pairs", "2", "--attribution-pairs", "0", "--no-eflomal"])}


@pytest.fixture
def no_loading(monkeypatch):
    """Loading the checkpoint is the first computation: a refused command never gets there."""
    def refuse(*args, **kwargs):
        raise AssertionError("the checkpoint was loaded before the arguments were checked")
    monkeypatch.setattr(checkpoint_store, "load_checkpoint", refuse)


def refused(command: str, extra: list[str], capsys) -> str:
    """Run a command in-process and return its one-line error; it must exit 2 before any work. "At once"
    is what the callers' no_loading fixture proves (loading the checkpoint, the first computation, raises),
    not a stopwatch, which a busy machine would fail."""
    main, small = COMMANDS[command]
    assert main([NUMBERS, *small, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert captured.out == ""                                            # no progress, no report
    return lines[0]


def device_node(path) -> None:
    """A /dev/null twin in tmp_path, where this process may make one."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod is not permitted here")


# ---- --out ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_a_device_as_out_is_refused_and_left_a_device(command, tmp_path, capsys, no_loading):
    node = tmp_path / "null"
    device_node(node)
    assert "character device" in refused(command, ["--out", str(node)], capsys)
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    link = tmp_path / "to-null.json"
    link.symlink_to(node)
    assert "character device" in refused(command, ["--out", str(link)], capsys)
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_a_directory_or_a_missing_folder_as_out_is_refused(command, tmp_path, capsys, no_loading):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "FIFO" in refused(command, ["--out", str(fifo)], capsys)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "dir").mkdir()
    assert "directory" in refused(command, ["--out", str(tmp_path / "dir")], capsys)
    (tmp_path / "to-dir").symlink_to(tmp_path / "dir")
    assert "directory" in refused(command, ["--out", str(tmp_path / "to-dir")], capsys)
    assert "does not exist" in refused(command, ["--out", str(tmp_path / "missing" / "x.json")], capsys)
    assert not (tmp_path / "missing").exists()                          # not made on the way either
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "symlink to nothing" in refused(command, ["--out", str(tmp_path / "dangling")], capsys)


def _as_its_owner(path, mode, **kwargs) -> bool:
    """os.access as the file's owner who is not root sees it: by the owner's permission bits."""
    bits = (os.stat(path).st_mode >> 6) & 7
    need = (4 if mode & os.R_OK else 0) | (2 if mode & os.W_OK else 0) | (1 if mode & os.X_OK else 0)
    return bits & need == need


def test_an_unwritable_out_is_refused_before_the_run(tmp_path, capsys, no_loading, monkeypatch):
    """Run as root (as CI runs), os.access says yes to everything: there the owner's bits decide, as they do
    for a user, so the refusal is checked on every machine (it was skipped as root)."""
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "access", _as_its_owner)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert "not writable" in refused("heads", ["--out", str(locked / "x.json")], capsys)
    finally:
        locked.chmod(0o700)
    readonly = tmp_path / "ro.json"
    readonly.write_text("{}")
    readonly.chmod(0o400)
    assert "not writable" in refused("align", ["--out", str(readonly)], capsys)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_in_a_model_folder_or_naming_an_input_is_refused_and_nothing_is_touched(command, tmp_path, capsys,
                                                                                       no_loading):
    import shutil
    ckpt = tmp_path / "ckpt"
    shutil.copytree(NUMBERS, ckpt)
    (ckpt / "notes").mkdir()
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in ckpt.iterdir() if p.is_file()}
    folder_times = ckpt.stat().st_mtime_ns, (ckpt / "notes").stat().st_mtime_ns
    for name in ("config.json", "model.safetensors", "result.json", "notes/x.json"):   # its files, or new ones in it
        assert "inside the model folder" in refused(command, ["--out", str(ckpt / name)], capsys)
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in ckpt.iterdir() if p.is_file()} == before
    assert (ckpt.stat().st_mtime_ns, (ckpt / "notes").stat().st_mtime_ns) == folder_times   # not even a probe file


def test_the_default_out_in_a_model_folder_says_it_is_the_default(tmp_path, capsys, no_loading, monkeypatch):
    import shutil
    ckpt = tmp_path / "ckpt"
    shutil.copytree(NUMBERS, ckpt)
    monkeypatch.chdir(ckpt)                                           # the default --out is in the working folder
    line = refused("heads", [], capsys)
    assert "(the default: give --out to write elsewhere)" in line and "inside the model folder" in line


def test_grounding_refuses_an_out_that_is_its_input(tmp_path, capsys):
    from explorer.studies.grounding.__main__ import main as grounding_main
    given = tmp_path / "sentences.txt"
    given.write_text("one\n")
    assert grounding_main([NUMBERS, "--input", str(given), "--out", str(given)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads it too (--input)" in err[0]
    assert given.read_text() == "one\n"


def test_check_output_file_takes_a_regular_file_or_a_new_name(tmp_path):
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    assert check_output_file(existing) == existing
    assert check_output_file(tmp_path / "new.json") == tmp_path / "new.json"
    (tmp_path / "link.json").symlink_to(existing)
    assert check_output_file(tmp_path / "link.json") == tmp_path / "link.json"
    with pytest.raises(UserFileError, match="not a directory"):
        check_output_file(existing / "x.json")
    with pytest.raises(UserFileError):
        check_output_file("")


# ---- counts ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, flag, bad", [
    ("heads", "--seeds", "1000000000"), ("heads", "--seeds", "11"), ("heads", "--seeds", "-1"),
    ("heads", "--sentences", "0"), ("heads", "--sentences", "1003"), ("heads", "--sentences", "1e9"),
    ("heads", "--points", "0"), ("heads", "--points", "33"), ("heads", "--points", "two"),
    ("align", "--pairs", "0"), ("align", "--pairs", "20001"), ("align", "--attribution-pairs", "-1"),
    ("align", "--attribution-pairs", "20001"), ("align", "--ig-steps", "1"), ("align", "--ig-steps", "129"),
    ("align", "--ig-steps", "3.5"), ("align", "--pairs", "9" * 5000)])
def test_every_count_has_a_range_checked_while_parsing(command, flag, bad, tmp_path, capsys, no_loading):
    line = refused(command, [flag, bad, "--out", str(tmp_path / "x.json")], capsys)
    assert flag in line and ("required" in line or "not a whole number" in line)
    assert len(line) < 200 and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("command, flag", [("heads", "--forced"), ("heads", "--single-removal")])
def test_a_long_value_outside_the_choices_is_echoed_cut_short(command, flag, tmp_path, capsys, no_loading):
    line = refused(command, [flag, "x" * 5000, "--out", str(tmp_path / "x.json")], capsys)
    assert flag in line and "invalid choice" in line and "choose from" in line and len(line) < 300


def test_the_ranges_are_the_library_settings_own():
    from explorer.studies.align.scorecard import RANGES as ALIGN, AlignSettings
    from explorer.studies.heads.job import RANGES as HEADS, LabSettings

    assert HEADS["seeds"] == (0, 10) and HEADS["sentences"][1] >= 500             # the app caps: 10 seeds, 500 sentences
    assert ALIGN["ig_steps"][1] >= 64                                            # the app's one-sentence cap
    with pytest.raises(ValueError, match="seeds"):
        LabSettings(seeds=HEADS["seeds"][1] + 1)
    with pytest.raises(ValueError, match="ig_steps"):
        AlignSettings(ig_steps=ALIGN["ig_steps"][1] + 1)
    LabSettings(sentences=HEADS["sentences"][1], seeds=HEADS["seeds"][1], points=HEADS["points"][1])
    AlignSettings(pairs=ALIGN["pairs"][1], attribution_pairs=0, ig_steps=ALIGN["ig_steps"][1])


# ---- --gold and other files read -------------------------------------------------------------------

def test_read_user_file_takes_regular_files_up_to_the_limit(tmp_path):
    f = tmp_path / "gold.align"
    f.write_bytes(b"x" * 100)
    assert read_user_file(f, 100) == b"x" * 100
    with pytest.raises(UserFileError, match="more than the 99"):
        read_user_file(f, 99)
    with pytest.raises(UserFileError, match="directory"):
        read_user_file(tmp_path, 100)
    with pytest.raises(UserFileError, match="cannot be read"):
        read_user_file(tmp_path / "missing", 100)
    with pytest.raises(UserFileError, match="character device"):
        read_user_file("/dev/zero", 100)                # stat says 0 bytes; it would never end


def test_read_user_file_never_waits_on_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to(fifo)
    outcome = []

    def read(path):
        try:
            read_user_file(path, 100)
        except UserFileError as err:
            outcome.append(str(err))
    for path in (fifo, tmp_path / "link"):
        reader = threading.Thread(target=read, args=(path,), daemon=True)
        reader.start()
        reader.join(STALL_S)                           # a read that waited for a writer would wait forever
        if reader.is_alive():                          # unblock the open so the thread can end
            with open(fifo, "wb"):
                pass
            pytest.fail(f"reading {path} waited for a writer")
    assert len(outcome) == 2 and all("FIFO" in o for o in outcome)


def test_a_gold_that_is_no_regular_file_or_too_large_is_refused_before_loading(tmp_path, capsys, no_loading,
                                                                               monkeypatch):
    from explorer.studies.align import gold_sets

    fifo = tmp_path / "gold.fifo"
    os.mkfifo(fifo)
    node = tmp_path / "zero"
    cases = [(fifo, "FIFO"), (tmp_path, "directory"), ("/dev/zero", "character device")]
    for gold, message in cases:
        assert message in refused("align", ["--gold", str(gold)], capsys)
    big = tmp_path / "big.align"
    big.write_text("a b ||| c d ||| 0-0\n" * 10, encoding="utf-8")
    monkeypatch.setattr(gold_sets, "MAX_BYTES", 100)
    assert "more than the 100" in refused("align", ["--gold", str(big)], capsys)
    big.write_bytes(b"\xff\xfe ||| x ||| 0-0\n")
    assert "not UTF-8" in refused("align", ["--gold", str(big)], capsys)
    device_node(node)
    assert "character device" in refused("align", ["--gold", str(node)], capsys)


# ---- --device -------------------------------------------------------------------------------------

@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name, message", [("nonsense", "unknown device"), ("cuda", "cpu or auto"),
                                           ("cuda:1", "cpu or auto"), ("meta", "not one this program runs on")])
def test_a_device_the_machine_lacks_is_one_line(command, name, message, tmp_path, capsys, no_loading, no_cuda):
    line = refused(command, ["--device", name, "--out", str(tmp_path / "x.json")], capsys)
    assert "--device" in line and message in line


def test_check_device_leaves_good_names_as_they_are(no_cuda):
    from explorer.runtime.device import check_device

    assert check_device("cpu") == "cpu" and check_device("auto") == "auto" and check_device("cpu:0") == "cpu:0"
    with pytest.raises(ValueError, match="unknown device"):
        check_device("gpu-please")


def test_evaluate_and_train_check_their_device_too(tmp_path, capsys, no_loading, no_cuda):
    from explorer.evaluation.command import main as evaluate_main
    from explorer.training.args import parse_command

    for name in ("nonsense", "cuda"):
        with pytest.raises(SystemExit) as exit_:
            evaluate_main([NUMBERS, "--device", name, "--no-write"])
        assert exit_.value.code == 2 and "--device" in capsys.readouterr().err
        with pytest.raises(ValueError, match="device"):
            parse_command(["--device", name, "--run-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


# ---- what still works ------------------------------------------------------------------------------

def test_both_commands_still_write_a_new_file_and_replace_a_regular_one(tmp_path, capsys):
    gold = tmp_path / "gold.align"
    gold.write_text("\ufeffone hundred ||| hundert ||| 0-0 1-0\nseven ||| sieben ||| 0-0\n", encoding="utf-8")
    old = tmp_path / "align.json"
    old.write_text("{}")
    assert align_main([NUMBERS, "--gold", str(gold), "--out", str(old), *COMMANDS["align"][1]]) == 0
    written = json.loads(old.read_text())
    assert written["gold"]["name"] == "gold.align" and written["rows"]          # the BOM is not part of line 1
    new = tmp_path / "heads.json"
    assert heads_main([NUMBERS, "--out", str(new), *COMMANDS["heads"][1]]) == 0
    assert json.loads(new.read_text())["settings"]["sentences"] == 2
    assert "written:" in capsys.readouterr().out


def test_ctrl_c_in_any_command_is_one_line_and_status_130(monkeypatch, capsys):
    from explorer.__main__ import main as explorer

    def interrupted(argv):
        raise KeyboardInterrupt
    monkeypatch.setattr("explorer.studies.heads.__main__.main", interrupted)
    assert explorer(["heads", NUMBERS]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stopped: heads was interrupted")


def test_contributions_refuses_an_out_that_is_one_of_the_files_it_combines(tmp_path, capsys, no_loading):
    from explorer.studies.contributions.__main__ import main as contributions_main
    parts = [tmp_path / "a.json", tmp_path / "b.json"]
    for part in parts:
        part.write_text("{}")
    argv = [NUMBERS, "--faithfulness", "--combine", *map(str, parts), "--out", str(parts[0])]
    assert contributions_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads it too (--combine)" in err[0] and parts[0].read_text() == "{}"


def test_contributions_counts_a_parts_values_before_it_parses_it(tmp_path, capsys, monkeypatch, no_loading):
    """A part within the byte limit but of millions of tiny values took ~27x its size to parse (a
    MemoryError under a cap escaped as a traceback): the values are counted first, as for every result."""
    import explorer.studies.contributions.__main__ as command

    monkeypatch.setattr(command, "RESULT_VALUES", 1_000)
    part = tmp_path / "part.json"
    part.write_text('{"settings": {}, "per_sentence": [' + ",".join(["{}"] * 2_000) + "]}")
    parsed = []
    monkeypatch.setattr(command, "json_of", lambda *a: parsed.append(a) or {})
    assert command.main([NUMBERS, "--faithfulness", "--combine", str(part)]) == 2
    assert not parsed
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a faithfulness scorecard JSON" in err[0]
