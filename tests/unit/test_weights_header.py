"""The safetensors header of a checkpoint's weights: the tensors' byte ranges must cover the data
region exactly, each tensor its own bytes, as the safetensors library requires. Ranges pointed at one
tensor's bytes loaded in silence (a model that listed fine and translated garbage)."""
from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from explorer.model import Transformer
from explorer.store.errors import CheckpointError
from explorer.store.weights import alias_groups, checked_state, read_header, read_tensors
from support.model_helpers import tiny_config


def _write(path, header: dict, data: bytes) -> None:
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


def _entry(start: int, stop: int, n: int) -> dict:
    return {"dtype": "F32", "shape": [n], "data_offsets": [start, stop]}


def test_a_file_the_library_writes_is_read(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"a": torch.ones(3), "b": torch.zeros(2, 2), "empty": torch.zeros(0)}, str(path))
    assert set(read_header(path)) == {"a", "b", "empty"}


@pytest.mark.parametrize("header, data, words", [
    ({"a": _entry(0, 16, 4), "b": _entry(0, 16, 4)}, 16, "overlap"),           # both on one tensor's bytes
    ({"a": _entry(0, 16, 4), "b": _entry(8, 24, 4)}, 24, "overlap"),           # half on its neighbour's
    ({"a": _entry(0, 16, 4), "b": _entry(20, 36, 4)}, 36, "leave a gap"),      # 4 bytes no tensor owns
    ({"a": _entry(4, 20, 4)}, 20, "leave a gap"),                              # the data begins unowned
])
def test_ranges_that_overlap_or_leave_a_gap_are_refused(tmp_path, header, data, words):
    path = tmp_path / "model.safetensors"
    _write(path, header, bytes(data))
    with pytest.raises(CheckpointError) as err:
        read_header(path)
    assert "corrupt safetensors header" in str(err.value) and words in str(err.value)
    assert str(path) in str(err.value)


def test_a_range_whose_length_is_not_its_shape_is_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    _write(path, {"a": _entry(0, 12, 4)}, bytes(12))
    with pytest.raises(CheckpointError, match="size does not match shape"):
        read_header(path)


def test_every_whole_byte_dtype_is_sized_and_an_unknown_one_is_named(tmp_path):
    """An int64 or bool tensor was a "corrupt header entry": a file with an unused integer buffer (as some
    exports keep) could not be imported at all. A dtype no safetensors writer uses is named."""
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.ones(3), "steps": torch.zeros(2, dtype=torch.int64), "mask": torch.ones(5, dtype=torch.bool)},
              str(path))
    assert {name: info["dtype"] for name, info in read_header(path).items()} == {"w": "F32", "steps": "I64",
                                                                                  "mask": "BOOL"}
    _write(path, {"a": {"dtype": "Q3", "shape": [4], "data_offsets": [0, 4]}}, bytes(4))
    with pytest.raises(CheckpointError, match=r"tensor 'a' has dtype 'Q3', which this tool cannot read \(one of BOOL"):
        read_header(path)


def test_a_weight_stored_as_integers_is_refused_naming_it(tmp_path):
    model = Transformer(tiny_config())
    state = model.state_dict()
    name = "decoder.layers.0.ffn.w_1.weight"
    stored = {names[0]: state[names[0]].contiguous() for names in alias_groups(model)}    # tied matrices once
    stored[name] = stored[name].to(torch.int32)
    path = tmp_path / "model.safetensors"
    save_file(stored, str(path))
    header = read_header(path)
    with pytest.raises(CheckpointError, match=rf"tensor '{name}' is stored as I32; a model's weights are floating-point"):
        checked_state(model, header, path)
    with pytest.raises(CheckpointError, match=rf"tensor '{name}' is stored as I32, not as floating-point"):
        list(read_tensors(path, header, [name]))
