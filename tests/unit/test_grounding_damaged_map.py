"""A kept encoder-state map that cannot be read (truncated, empty, a directory, a header claiming a huge
array) is not used, and that is said: build.kept_states_and_why gives the reason as plain data, the
grounding command warns on stderr naming the file, and the verdict is made without the map; with
--states, a directory where the map goes is refused in one line instead of an OSError after the pass."""
from __future__ import annotations

import json
import shutil
import struct
from types import SimpleNamespace

import pytest

from explorer.store.checkpoint import read_config
from explorer.studies.grounding import states
from explorer.studies.grounding.__main__ import main as grounding_main
from explorer.studies.grounding.build import dataset_of, kept_states, kept_states_and_why
from support.app_support import NUMBERS


@pytest.fixture
def numbers(tmp_path, monkeypatch):
    """(a copy of the shipped numbers-en-de, its meta, where its encoder-state map is kept under a tmp runs/)."""
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    ckpt = tmp_path / "numbers-en-de"
    shutil.copytree(NUMBERS, ckpt)
    meta, _ = read_config(ckpt)
    path = states.map_path(dataset_of(meta), str(meta["weights_sha256"]))
    assert not states.is_shipped(path)                   # the shipped numbers model has no map: a kept one
    path.parent.mkdir(parents=True)
    return ckpt, meta, path


def _huge_header() -> bytes:
    header = json.dumps({"mean": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4 << 40]}}).encode()
    return struct.pack("<Q", len(header)) + header


@pytest.mark.parametrize("damage", ["truncated", "empty", "directory", "huge"])
def test_a_damaged_kept_map_is_not_used_and_says_why(numbers, damage):
    _, meta, path = numbers
    if damage == "directory":
        path.mkdir()
    else:
        path.write_bytes({"truncated": b"\x10\x00\x00\x00\x00\x00\x00\x00{\"mean\":", "empty": b"",
                          "huge": _huge_header()}[damage])
    model = SimpleNamespace(cfg=SimpleNamespace(d_model=64))
    found, why = kept_states_and_why(model, meta, 1000)
    assert found is None and why.startswith(f"{path}: ") and "\n" not in why
    assert kept_states(model, meta, 1000) is None                 # the app's call: still no map, no exception
    path.rmdir() if damage == "directory" else path.unlink()
    assert kept_states_and_why(model, meta, 1000) == (None, "")    # no map kept: nothing to say


def test_the_command_warns_of_a_damaged_map_and_judges_without_it(numbers, tmp_path, capsys):
    ckpt, _, path = numbers
    (tmp_path / "in.txt").write_text("three hundred and forty-two\nmy sister works in a hospital\n")
    args = [str(ckpt), "--input", str(tmp_path / "in.txt"), "--beam", "1"]
    assert grounding_main(args + ["--out", str(tmp_path / "none.json")]) == 0
    capsys.readouterr()
    path.write_bytes(b"")
    assert grounding_main(args + ["--out", str(tmp_path / "damaged.json")]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(path) in warnings[0] and "not used" in warnings[0] \
        and "--states builds it again" in warnings[0]
    none, damaged = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("none", "damaged"))
    assert damaged["states"] is None and damaged["sentences"] == none["sentences"]


def test_states_refuses_a_directory_where_the_map_goes_in_one_line(numbers, tmp_path, capsys):
    ckpt, _, path = numbers
    path.mkdir()
    (tmp_path / "in.txt").write_text("three hundred and forty-two\n")
    out = tmp_path / "g.json"
    assert grounding_main([str(ckpt), "--input", str(tmp_path / "in.txt"), "--out", str(out), "--states"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: a directory") and "\n" not in err and not out.exists()
