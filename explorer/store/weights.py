"""A checkpoint's weights file (model.safetensors) read as untrusted input.

Everything here reads the safetensors header or streams values; nothing is sized by what a
config.json claims until the header has been checked against the file's size (read_header) and
against the config's parameter count and the memory the load will take (check_size). Saving shares alias_groups (tied matrices are
stored once) and sha256 with loading.
"""
from __future__ import annotations

import hashlib
import math
import os
import struct
import sys
from pathlib import Path
from typing import BinaryIO, Collection, Iterable, Iterator

import numpy as np
import torch

from explorer.files.user_files import UserFileError, absent_or_odd, open_regular, parse_json
from explorer.config import ModelConfig
from explorer.files.settings import MAX_MODEL_BYTES_ENV, max_model_bytes, size_text
from explorer.model import Transformer, parameter_count
from explorer.store.errors import CheckpointError

MAX_HEADER_BYTES = 100 << 20     # the safetensors library's own limit on a header
_ST_DTYPES = {"F16": torch.float16, "F32": torch.float32, "BF16": torch.bfloat16, "F64": torch.float64}  # weights
# Every whole-byte safetensors dtype, by bytes per value: a header's sizes are checked for all of them, so a
# tensor of another dtype that nothing reads (an int64 buffer some exports keep) is no reason to refuse a file.
_ST_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def read_header(path: Path) -> dict[str, dict]:
    """The safetensors header {name: {dtype, shape, data_offsets}}, checked against the file size
    (a header that claims more bytes than the file has is refused before it is read)."""
    if problem := absent_or_odd(path):
        raise CheckpointError(f"{path}: {problem}")
    try:
        with _open(path) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: truncated ({size} bytes; no header)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise CheckpointError(f"{path}: corrupt safetensors header ({n:,} bytes claimed)")
            if n > size - 8:
                raise CheckpointError(f"{path}: truncated or not a safetensors file (header of {n} bytes "
                                      f"in a {size}-byte file)")
            header = parse_json(f.read(n))
    except (UnicodeDecodeError, ValueError):                 # json's errors, and a header nested too deeply
        raise CheckpointError(f"{path}: corrupt safetensors header (not JSON)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header")
    header.pop("__metadata__", None)
    for name, info in header.items():
        try:
            start, stop = info["data_offsets"]
            shape = info["shape"]
            if not all(type(v) is int and v >= 0 for v in [start, stop, *shape]) or start > stop:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: corrupt header entry for {name!r}") from None
        itemsize = _ST_ITEMSIZE.get(info.get("dtype")) if isinstance(info.get("dtype"), str) else None
        if itemsize is None:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {str(info.get('dtype'))[:20]!r}, which this tool "
                                  f"cannot read (one of {', '.join(_ST_ITEMSIZE)})")
        numel = 1
        for s in shape:
            numel *= s
        if stop - start != numel * itemsize:
            raise CheckpointError(f"{path}: corrupt header entry for {name!r} (size does not match shape)")
    end = _check_tiling(path, header)
    if 8 + n + end != size:
        raise CheckpointError(f"{path}: truncated or padded: expected {8 + n + end} bytes, found {size}")
    return header


def _check_tiling(path: Path, header: dict[str, dict]) -> int:
    """The end of the data region, once the tensors' byte ranges, in order, are seen to cover it exactly
    (as the safetensors library checks): every tensor its own bytes. Ranges that overlap load in
    silence otherwise (every tensor pointed at one tensor's bytes: a model that lists fine and
    translates garbage), and a gap hides bytes no tensor owns."""
    end, before = 0, None
    for name, info in sorted(header.items(), key=lambda item: tuple(item[1]["data_offsets"])):
        start, stop = info["data_offsets"]
        if start != end:
            where = f"where {before!r} ends" if before is not None else "where the data begins"
            raise CheckpointError(f"{path}: corrupt safetensors header: tensor {name!r} starts at byte {start:,} of the "
                                  f"data, not at byte {end:,} {where} (tensors that "
                                  f"{'overlap' if start < end else 'leave a gap'}; damaged, or not written by "
                                  "a safetensors writer)")
        end, before = stop, name
    return end


def check_size(cfg: ModelConfig, header: dict[str, dict], weights: Path) -> None:
    """The weights file must hold exactly as many values as the config's model has parameters.

    Checked from the header and the config alone, before a model is built: the header was already
    checked against the file's size, so nothing sized by config.json is allocated unless the file
    on disk is really that big.
    """
    stored = sum(math.prod(info["shape"]) for info in header.values())
    expected = parameter_count(cfg)
    if stored != expected:
        raise CheckpointError(f"{weights}: holds {stored:,} values, but config.json describes a model of "
                              f"{expected:,} parameters (damaged, or the wrong config)")
    check_memory(str(weights), load_bytes(cfg, header))


def load_bytes(cfg: ModelConfig, header: dict[str, dict] | None = None, *, copies: int = 1,
               read: Collection[str] | None = None) -> int:
    """The bytes a load holds at its peak, from the config and the header alone: `copies` float32 copies
    of every parameter (load_checkpoint builds the model, then reads one stored tensor at a time into
    it: 1; an import holds the converted tensors beside the model: 2), the positional tables (one
    buffer per stack, none when positions are learned: they are parameters), and the largest stored
    tensor as read (its own dtype) and as converted to float32: of those named in `read` when given (an
    import reads only the tensors its model needs; a stored tensor it leaves alone takes no memory).

    A file's size on disk says nothing about this (a sparse file of 8 KB can claim a 1 GB tensor),
    hence a bound in bytes of memory, checked before anything is allocated."""
    tables = 0 if cfg.positions == "learned" else 2 * 4 * cfg.max_len * cfg.d_model
    largest = 0
    for name, info in (header or {}).items():
        if read is None or name in read:
            largest = max(largest, math.prod(info["shape"]) * (_ST_ITEMSIZE[info["dtype"]] + 4))
    return copies * 4 * parameter_count(cfg) + tables + largest


def check_memory(what: str, need: int) -> None:
    """Refuse a load that would take more than the bound (explorer.files.settings.max_model_bytes)."""
    limit = max_model_bytes()
    if need > limit:
        raise CheckpointError(f"{what}: loading this model would take {size_text(need)} of memory, more than "
                              f"the {size_text(limit)} one model may take here (MAX_MODEL_BYTES in "
                              f"explorer/files/settings.py; ${MAX_MODEL_BYTES_ENV} sets another bound)")


def checked_state(model: Transformer, header: dict[str, dict], weights: Path) -> dict[str, str]:
    """Map every state_dict name to the stored tensor that holds it; check names and shapes."""
    expected = model.state_dict()
    mapping: dict[str, str] = {}
    for names in alias_groups(model):
        stored = [n for n in names if n in header]
        if not stored:
            raise CheckpointError(f"{weights}: missing tensor {names[0]!r}")
        for name in names:
            mapping[name] = stored[0]
    for name, stored in mapping.items():
        want, got = list(expected[name].shape), header[stored]["shape"]
        if want != got:
            raise CheckpointError(f"{weights}: tensor {stored!r} has shape {got}, the config needs {want}")
        if header[stored]["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"{weights}: tensor {stored!r} is stored as {header[stored]['dtype']}; a model's "
                                  f"weights are floating-point ({', '.join(_ST_DTYPES)})")
    unexpected = sorted(set(header) - set(mapping))
    if unexpected:
        raise CheckpointError(f"{weights}: unexpected tensor(s) {unexpected[:5]} (wrong model config?)")
    return mapping


def read_tensors(path: Path, header: dict[str, dict], names: Iterable[str]) -> Iterator[tuple[str, torch.Tensor]]:
    """Each named tensor of a checked header (read_header), read from the file into memory of its
    own, one at a time, in file order.

    Not safetensors' safe_open: it maps the whole file, and every page a load touches stays counted in
    the process's resident memory (a 100 MB file: 100 MB more at the load's peak than load_bytes says).
    Here the peak is the tensor being read."""
    with _open(path) as f:
        (n,) = struct.unpack("<Q", f.read(8))
        for name in sorted(names, key=lambda k: header[k]["data_offsets"][0]):
            info = header[name]
            if (dtype := _ST_DTYPES.get(info["dtype"])) is None:          # checked_state refuses it first
                raise CheckpointError(f"{path}: tensor {name!r} is stored as {info['dtype']}, not as floating-point")
            start, stop = info["data_offsets"]
            f.seek(8 + n + start)
            data = bytearray(stop - start)
            if f.readinto(data) != len(data):
                raise CheckpointError(f"{path}: truncated while reading {name!r}")
            tensor = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
            if sys.byteorder != "little":                                   # the format is little-endian
                tensor = torch.from_numpy(tensor.numpy().byteswap())
            yield name, tensor.reshape(info["shape"])


def check_finite(weights: Path, name: str, tensor: torch.Tensor) -> None:
    """NaN/inf check in numpy: torch.isfinite on CPU float16 measured ~50x slower (1.5 s for a 16 MB model)."""
    if not tensor.is_floating_point():
        return
    values = tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()
    if not bool(np.isfinite(values).all()):
        raise CheckpointError(f"{weights}: tensor {name!r} holds NaN or infinite values (a diverged or damaged model)")


def alias_groups(model: torch.nn.Module) -> list[list[str]]:
    """State-dict names grouped by the tensor they name (tied weights: one group of three names)."""
    keys = set(model.state_dict())
    groups: dict[int, list[str]] = {}
    for name, t in [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]:
        if name in keys:
            groups.setdefault(id(t), []).append(name)
    return list(groups.values())


def _open(path: Path) -> BinaryIO:
    """The weights file opened for reading as explorer.files.user_files checks it: a regular file, never
    a FIFO's wait, and no symlink leading out of the folder it lies in (CheckpointError otherwise)."""
    try:
        return os.fdopen(open_regular(path, inside=Path(path).parent), "rb")
    except UserFileError as exc:
        raise CheckpointError(str(exc)) from None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with _open(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
