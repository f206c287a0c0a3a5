"""`convert` and `ship` refuse bad input in one line: exit status 2, one stderr line `error: ...` naming the
file at fault (or the folders), no traceback, and nothing written.

From a probe: a garbage pytorch_model.bin quoted PyTorch's 8-line advice to load it with
weights_only=False (which runs the file's code); config.json's `"encoder_attention_heads": "4"` was
reported as differing from decoder_attention_heads (4), `"scale_embedding": "false"` imported as true,
`"dropout": "0.1"` as 0.1; a deeply nested config.json gave Python's recursion message with no file
name; and an output inside the source (`convert to-hf CK CK/hf`, `ship SRC SRC/sub`) was written there.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from explorer.interop.cli import main as convert
from explorer.store.ship import main as ship

pytest.importorskip("transformers")
from support.m2m100_helpers import random_m2m100  # noqa: E402
from support.marian_helpers import random_marian  # noqa: E402
from support.waiting import STALL_S  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "numbers-en-de"


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("marian") / "opus-mt-es-en"
    random_marian(source)
    return source


def copy_of(source: Path, tmp_path: Path, name: str = "edited") -> Path:
    target = tmp_path / name
    shutil.copytree(source, target)
    return target


def one_error_line(err: str, *named: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    for name in named:
        assert name in lines[0], (name, err)
    return lines[0]


def refused(command, argv: list[str], capsys, *named: str) -> str:
    capsys.readouterr()
    assert command(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return one_error_line(captured.err, *named)


def listing(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*"))}


# ---- 1. a pytorch_model.bin that is not one -------------------------------------------------------

def _with_bin(marian_dir: Path, tmp_path: Path, data: bytes | None = None, obj=None) -> Path:
    source = copy_of(marian_dir, tmp_path)
    (source / "model.safetensors").unlink()
    if data is not None:
        (source / "pytorch_model.bin").write_bytes(data)
    else:
        torch.save(obj, source / "pytorch_model.bin")
    return source


def test_a_garbage_weights_file_is_named_in_one_line_without_unsafe_advice(marian_dir, tmp_path):
    """Through the real command line: nothing PyTorch prints may reach the user."""
    source = _with_bin(marian_dir, tmp_path, data=os.urandom(5000))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "explorer", "convert", "from-hf", str(source), str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=STALL_S)   # a hang guard only
    assert run.returncode == 2 and run.stdout == ""
    line = one_error_line(run.stderr, str(source / "pytorch_model.bin"), "not a readable PyTorch weights file")
    assert "weights_only" not in line and "will likely succeed" not in line
    assert not out.exists()


class Pickled:                      # a class, not a tensor: refused by weights_only, never run
    pass


@pytest.mark.parametrize("kind", ["truncated zip", "an object other than tensors"])
def test_an_unreadable_weights_file_is_named_in_one_line(marian_dir, tmp_path, capsys, kind):
    if kind == "truncated zip":
        good = tmp_path / "good.bin"
        torch.save({"x": torch.zeros(3)}, good)
        source = _with_bin(marian_dir, tmp_path, data=good.read_bytes()[:200])
    else:
        source = _with_bin(marian_dir, tmp_path, obj={"x": Pickled()})
    out = tmp_path / "out"
    line = refused(convert, ["from-hf", str(source), str(out)], capsys, str(source / "pytorch_model.bin"))
    assert "weights_only" not in line
    assert not out.exists()


# ---- 2. config.json fields of the wrong kind ------------------------------------------------------

@pytest.mark.parametrize("edit, said", [
    ({"encoder_attention_heads": "4"}, "encoder_attention_heads must be a whole number, not the text '4'"),
    ({"decoder_attention_heads": "4"}, "decoder_attention_heads must be a whole number, not the text '4'"),
    ({"d_model": 32.0}, "d_model must be a whole number, not the number 32.0"),
    ({"vocab_size": True}, "vocab_size must be a whole number, not true"),
    ({"encoder_layers": [2]}, "encoder_layers must be a whole number, not a list"),
    ({"max_position_embeddings": None}, "max_position_embeddings must be a whole number, not null"),
    ({"pad_token_id": "x" * 5000}, "pad_token_id must be a whole number, not the text 'xxx"),
    ({"decoder_start_token_id": "5"}, "decoder_start_token_id must be a whole number or null"),
    ({"scale_embedding": "false"}, "scale_embedding must be true or false, not the text 'false'"),
    ({"share_encoder_decoder_embeddings": 1}, "share_encoder_decoder_embeddings must be true or false"),
    ({"normalize_before": "no"}, "normalize_before must be true or false"),
    ({"dropout": "0.1"}, "dropout must be a number, not the text '0.1'"),
    ({"activation_function": ["swish"]}, "activation_function must be text, not a list"),
    ({"encoder_ffn_dim": None}, "encoder_ffn_dim must be a whole number, not null"),
    ({"decoder_layers": "missing"}, "decoder_layers is missing"),
    ({"encoder_attention_heads": 0, "decoder_attention_heads": 0}, "encoder_attention_heads must be an integer in"),
    ({"decoder_ffn_dim": 1 << 40}, "decoder_ffn_dim must be an integer in"),
])
def test_a_marian_config_field_of_the_wrong_kind_is_named_as_such(marian_dir, tmp_path, capsys, edit, said):
    source = copy_of(marian_dir, tmp_path)
    config = json.loads((source / "config.json").read_text())
    config.update(edit)
    config = {k: v for k, v in config.items() if v != "missing"}
    (source / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    line = refused(convert, ["from-hf", str(source), str(out)], capsys, str(source / "config.json"), said)
    assert len(line) < 400 and "differs" not in line
    assert not out.exists()


@pytest.mark.parametrize("edit, said", [
    ({"encoder_attention_heads": "4"}, "encoder_attention_heads must be a whole number, not the text '4'"),
    ({"scale_embedding": 1}, "scale_embedding must be true or false, not the number 1"),
])
def test_an_m2m100_config_field_of_the_wrong_kind_is_named_as_such(tmp_path, capsys, edit, said):
    source = tmp_path / "m2m"
    random_m2m100(source)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, **edit}))
    out = tmp_path / "out"
    refused(convert, ["from-hf", str(source), str(out)], capsys, str(source / "config.json"), said)
    assert not out.exists()


# ---- 3. JSON nested too deeply --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, '{"a":' * 100000 + "1" + "}" * 100000],
                         ids=["arrays", "objects"])
def test_json_nested_too_deeply_is_named(marian_dir, tmp_path, capsys, name, text):
    source = copy_of(marian_dir, tmp_path)
    (source / name).write_text(text)
    out = tmp_path / "out"
    line = refused(convert, ["from-hf", str(source), str(out)], capsys, str(source / name), "nested too deeply")
    assert "recursion" not in line
    assert not out.exists()


# ---- 4. an output inside its source (or holding it) -----------------------------------------------

@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return copy_of(SHIPPED, tmp_path, "ck")


@pytest.mark.parametrize("command, argv", [
    (convert, ["to-hf"]), (convert, ["to-ct2"]), (ship, []),
], ids=["to-hf", "to-ct2", "ship"])
@pytest.mark.parametrize("inside", ["ck/sub", "ck/sub/deeper", "link/sub"])
def test_an_output_inside_the_checkpoint_is_refused_before_any_work(checkpoint, capsys, command, argv, inside):
    (checkpoint.parent / "link").symlink_to(checkpoint)          # the same folder under another name
    before = listing(checkpoint)
    out = checkpoint.parent / inside
    refused(command, argv + [str(checkpoint), str(out)], capsys, str(out), str(checkpoint), "inside")
    assert listing(checkpoint) == before


@pytest.mark.parametrize("command, argv", [
    (convert, ["to-hf"]), (convert, ["to-ct2"]), (ship, []),
], ids=["to-hf", "to-ct2", "ship"])
def test_an_output_holding_the_checkpoint_is_refused(checkpoint, capsys, command, argv):
    before = listing(checkpoint.parent)
    refused(command, argv + [str(checkpoint), str(checkpoint.parent)], capsys, str(checkpoint))
    assert listing(checkpoint.parent) == before


def test_an_import_inside_its_hugging_face_source_is_refused(marian_dir, tmp_path, capsys):
    source = copy_of(marian_dir, tmp_path)
    before = listing(source)
    refused(convert, ["from-hf", str(source), str(source / "ours")], capsys, str(source / "ours"), "inside")
    refused(convert, ["from-hf", str(source), str(tmp_path)], capsys, str(source))
    assert listing(source) == before
