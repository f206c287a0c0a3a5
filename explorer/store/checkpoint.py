"""The checkpoint format: one directory, always whole, loaded without pickle.

    <dir>/config.json        format_version, model (ModelConfig), tokenizer files, languages, training summary
    <dir>/model.safetensors  weights only (float16 or float32); tied matrices stored once
    <dir>/<tokenizer files>  whatever the tokenizer's save() wrote: sentencepiece models, or Marian's
                             source.spm + target.spm + vocab.json (explorer.text.load_tokenizer tells them apart)
    <dir>/card.json          optional: evaluation results (written later by explorer.evaluate)
    <dir>/trainer_state.pt   optional: resume state, loadable with torch.load(weights_only=True)
    <dir>/test.tsv           optional: the held-out test split (shipped checkpoints; explorer.store.ship)

The weights file itself is read as untrusted input by explorer/store/weights.py.

Saving writes a hidden sibling `.<name>.tmp-*`, fsyncs every file and the directory, then swaps:
the old directory is renamed aside (`.<name>.old-*`), the new one renamed in, the old one removed.
Killed at any point, either the old or the new checkpoint is whole: loading falls back to the
aside copy when the target is missing, and the next save finishes the recovery. Loading only reads
(the app never writes a run directory) and turns every problem into a CheckpointError naming the
file, never a traceback from inside a library.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from explorer.config import ModelConfig
from explorer.files import limits
from explorer.files.atomic import asides, fsync_dir, recover, write_directory, write_json_atomic
from explorer.files.names import CARD, CONFIG, TRAINER_STATE, WEIGHTS
from explorer.files.user_files import absent_or_odd, read_user_json
from explorer.model import Transformer
from explorer.runtime.device import resolve_device
from explorer.store import weights as wf
from explorer.store.trainer_state import save_trainer_state
from explorer.store.errors import CheckpointError
from explorer.store.output_dirs import write_output_dir
from explorer.text import load_tokenizer

FORMAT_VERSION = 1
META_KEYS = ("name", "src_lang", "tgt_lang", "training")


@dataclass
class LoadedCheckpoint:
    model: Transformer          # eval() mode, float32
    tokenizer: Any
    config: ModelConfig
    meta: dict                  # the whole config.json
    card: dict | None
    path: Path
    name: str
    sha256: str                 # short hash of model.safetensors

    @property
    def cache_key(self) -> tuple[str, str]:
        """What identifies these weights in a cache of results computed on them: where they were read
        from and their hash (the same file rewritten in place is another key)."""
        return str(self.path), self.sha256

    @property
    def language_pair(self) -> tuple[str, str] | tuple[()]:
        """The pair a multilingual model's tokenizer is bound to (explorer.text.multilingual), () for a
        one-pair model: with cache_key, what identifies a result computed through the tokenizer."""
        if hasattr(self.tokenizer, "with_languages"):
            return str(self.tokenizer.src_lang), str(self.tokenizer.tgt_lang)
        return ()


# ---- saving ---------------------------------------------------------------------------------------

def save_checkpoint(directory: str | os.PathLike, model: Transformer, tokenizer: Any, *, meta: dict,
                    dtype: torch.dtype = torch.float32, trainer_state: dict | None = None,
                    card: dict | None = None, output_of: str | None = None, overwrite: bool = False,
                    inputs: tuple = (), extra_files: dict[str, bytes] | None = None) -> Path:
    """Write a whole checkpoint to `directory` atomically; returns its path.

    An existing `directory` is replaced only if it is a checkpoint of this format. A command that writes
    where its user says (output_of: its name, e.g. "explorer.convert from-hf") goes further: only a new
    or empty directory or that command's own earlier output is replaced (explorer.store.output_dirs;
    `overwrite`, `inputs` as there). The trainer writes its own run directory and passes neither.
    `extra_files` (name -> bytes, e.g. a shipped test.tsv) are written into the new directory with the
    rest, so they are as whole as it is and listed in its marker."""
    unknown = sorted(set(meta) - set(META_KEYS))
    if unknown:
        raise ValueError(f"unknown meta key(s) {unknown}; allowed: {list(META_KEYS)}")
    if dtype not in (torch.float16, torch.float32):
        raise ValueError(f"dtype must be torch.float16 or torch.float32, not {dtype}")
    target = Path(directory)
    if output_of is None:                      # (a command's output is checked before anything moves: below)
        target.parent.mkdir(parents=True, exist_ok=True)
        recover(target)
        if target.exists() and any(target.iterdir()) and not _is_checkpoint(target):
            raise ValueError(f"{target} exists and is not a checkpoint; refusing to replace it")

    def write(tmp: Path) -> None:
        tensors = _weights_to_save(model, dtype)
        save_file(tensors, str(tmp / WEIGHTS), metadata={"format": "pt"})
        files = list(tokenizer.save(tmp))
        if trainer_state is not None:
            save_trainer_state(trainer_state, tmp / TRAINER_STATE)
        if card is not None:
            (tmp / CARD).write_text(json.dumps(card, indent=2), encoding="utf-8")
        for extra, data in (extra_files or {}).items():
            (tmp / extra).write_bytes(data)
        config = {
            "format_version": FORMAT_VERSION,
            "name": meta.get("name", target.name),
            "model": model.cfg.to_dict(),
            "tokenizer": {"files": files, "joint": bool(getattr(tokenizer, "joint", model.cfg.tie_embeddings))},
            "src_lang": meta.get("src_lang"),
            "tgt_lang": meta.get("tgt_lang"),
            "training": meta.get("training", {}),
            "dtype": "float16" if dtype == torch.float16 else "float32",
            "weights_sha256": wf.sha256(tmp / WEIGHTS),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (tmp / CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")   # written last: marks tmp complete
    if output_of is not None:                  # checked, marked and checked again before the swap
        return write_output_dir(target, output_of, write, overwrite=overwrite, inputs=inputs)
    return write_directory(target, write)


def _is_checkpoint(directory: Path) -> bool:
    """A config.json of this format (any other file of that name belongs to something else)."""
    try:
        meta = read_user_json(directory / CONFIG, limits.JSON_BYTES, inside=directory)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("format_version") == FORMAT_VERSION


def _weights_to_save(model: Transformer, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """CPU copies in `dtype`, one entry per storage (tied matrices once, under their first name).

    Not save_model(): it saves the live tensors as they are, and float16 must not touch the model.
    The file stays compatible with safetensors.torch.load_model (it accepts any alias present).
    """
    out: dict[str, torch.Tensor] = {}
    state = model.state_dict()
    for names in wf.alias_groups(model):
        name, t = names[0], state[names[0]]
        copy = t.detach().to("cpu", dtype=dtype if t.is_floating_point() else t.dtype, copy=True).contiguous()
        if t.is_floating_point() and not bool(torch.isfinite(copy).all()) and bool(torch.isfinite(t).all()):
            raise ValueError(f"{name}: values past {str(dtype).removeprefix('torch.')}'s range; save in float32 "
                             f"(python -m explorer convert: --dtype float32)")
        out[name] = copy
    return out


def write_card(directory: str | os.PathLike, card: dict) -> None:
    """Replace card.json atomically (temp file + fsync + os.replace)."""
    write_json_atomic(Path(directory) / CARD, card)
    fsync_dir(Path(directory))


# ---- loading --------------------------------------------------------------------------------------

def resolve(directory: str | os.PathLike) -> Path:
    """The directory to read: the target, or the whole old copy an interrupted save left aside."""
    target = Path(directory)
    if (target / CONFIG).is_file():
        return target
    old_copies = asides(target) if target.parent.is_dir() else []
    if old_copies:
        return old_copies[-1]
    if not target.is_dir():
        raise CheckpointError(f"{target}: checkpoint directory not found")
    raise CheckpointError(f"{target / CONFIG}: file missing (not a checkpoint directory?)")


def read_config(directory: str | os.PathLike) -> tuple[dict, ModelConfig]:
    """config.json, validated, and the ModelConfig it describes."""
    path = resolve(directory) / CONFIG
    meta = _read_json(path)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})")
    for key in ("model", "tokenizer"):
        if not isinstance(meta.get(key), dict):
            raise CheckpointError(f"{path}: missing or invalid {key!r} section")
    if meta.get("dtype", "float32") not in ("float16", "float32"):
        raise CheckpointError(f"{path}: dtype must be 'float16' or 'float32', not {meta.get('dtype')!r}")
    try:
        cfg = ModelConfig.from_dict(meta["model"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: model: {exc}") from None
    return meta, cfg


def read_card(directory: str | os.PathLike) -> dict | None:
    """card.json's contents, None when there is none; one that is there but not a small regular file
    of this folder (a FIFO, a symlink out, 10 GiB) is a CheckpointError, not an absent card."""
    path = resolve(directory) / CARD
    return _read_json(path) if os.path.lexists(path) else None


def load_checkpoint(directory: str | os.PathLike, device: str | torch.device = "cpu") -> LoadedCheckpoint:
    """Validate and load a checkpoint: float32 model in eval() mode on `device` ("auto" picks CUDA)."""
    path = resolve(directory)
    meta, cfg = read_config(path)
    weights = path / WEIGHTS
    header = read_weights_header(path)              # missing, truncated, malformed header
    wf.check_size(cfg, header, weights)             # before anything the config sizes is allocated
    expected = meta.get("weights_sha256")
    sha = wf.sha256(weights)
    if expected is not None and sha != expected:
        raise CheckpointError(f"{weights}: content does not match the sha256 in config.json (corrupted file)")
    model = Transformer(cfg)
    _read_weights_into(model, wf.checked_state(model, header, weights), header, weights)
    model = model.to(resolve_device(str(device))).eval()
    tokenizer = _load_tokenizer(path, meta, cfg)
    return LoadedCheckpoint(model=model, tokenizer=tokenizer, config=cfg, meta=meta, card=read_card(path),
                            path=path, name=meta.get("name") or Path(directory).name, sha256=sha[:12])


def _read_weights_into(model: Transformer, state: dict[str, str], header: dict[str, dict], weights: Path) -> None:
    """Copy each stored tensor into the parameters it holds (tied ones share it), one tensor in memory
    at a time: the peak is the model plus the largest tensor (weights.load_bytes), never a second
    model's worth of float32 copies."""
    params = model.state_dict()                     # the live tensors (shared storage)
    holders: dict[str, list[str]] = {}
    for name, stored in state.items():
        holders.setdefault(stored, []).append(name)
    try:
        with torch.no_grad():
            for stored, tensor in wf.read_tensors(weights, header, holders):
                wf.check_finite(weights, stored, tensor)
                for name in holders[stored]:
                    params[name].copy_(tensor)      # float16 -> float32 in the copy
                del tensor
    except (OSError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{weights}: cannot read tensors: {exc}") from None


def load_trainer_state(directory: str | os.PathLike) -> dict:
    """The resume state saved with the checkpoint (no pickle: weights_only=True)."""
    path = resolve(directory) / TRAINER_STATE
    if not path.is_file():
        raise CheckpointError(f"{path}: file missing (checkpoint saved without trainer state)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"{path}: cannot load trainer state: {exc}") from None


def read_weights_header(directory: str | os.PathLike) -> dict[str, dict]:
    """The safetensors header of a checkpoint directory's weights, checked against the file size."""
    return wf.read_header(resolve(directory) / WEIGHTS)


def verify_contents(directory: str | os.PathLike, meta: dict, cfg: ModelConfig) -> None:
    """What loading would find wrong in the files' contents, read with one tensor in memory at a time:
    the sha256 in config.json, NaN or infinite weights, a tokenizer that does not load or fit the model.

    For listings (load_checkpoint checks the same while it loads). The header must already have
    been checked against the config (weights.check_size), so no tensor is larger than the file says.
    """
    path = resolve(directory)
    weights = path / WEIGHTS
    expected = meta.get("weights_sha256")
    if expected is not None and wf.sha256(weights) != expected:
        raise CheckpointError(f"{weights}: content does not match the sha256 in config.json (corrupted file)")
    try:
        header = wf.read_header(weights)
        for name, tensor in wf.read_tensors(weights, header, header):
            wf.check_finite(weights, name, tensor)
    except (OSError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{weights}: cannot read tensors: {exc}") from None
    _load_tokenizer(path, meta, cfg)


def _load_tokenizer(path: Path, meta: dict, cfg: ModelConfig) -> Any:
    files = meta["tokenizer"].get("files", [])
    for name in files:
        if problem := absent_or_odd(path / name):
            raise CheckpointError(f"{path / name}: tokenizer {problem}" if problem == "file missing"
                                  else f"{path / name}: the tokenizer file is {problem}")
    where = ", ".join(str(path / f) for f in files) or str(path)
    try:
        tokenizer = _tokenizer_loader()(path)
    except CheckpointError:
        raise
    except Exception as exc:                       # a message that names its file already says where, once
        said = str(exc)
        place = path if any(said.startswith(name) or said.startswith(str(path / name)) for name in files) else where
        raise CheckpointError(f"{place}: cannot load tokenizer: {said}") from None
    sizes = _vocab_sizes(tokenizer)
    if sizes is not None and sizes != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise CheckpointError(f"{where}: tokenizer vocabulary sizes {sizes} do not match the model's "
                              f"({cfg.src_vocab_size}, {cfg.tgt_vocab_size}) in {path / CONFIG}")
    special = getattr(tokenizer, "special", None)      # a tokenizer that names its own ids (Marian's);
    if special is not None:                            # the decoder's start id is the model's to choose
        said, model_ids = (special.pad, special.unk, special.eos), (cfg.pad_id, cfg.unk_id, cfg.eos_id)
        if said != model_ids:
            raise CheckpointError(f"{where}: the tokenizer's pad, unk and eos ids {said} differ from the "
                                  f"model's {model_ids} in {path / CONFIG}")
    return tokenizer


def _tokenizer_loader():
    """directory -> tokenizer: explorer.text.load_tokenizer, which picks the kind from the files
    (a seam: tests substitute a stand-in's load)."""
    return load_tokenizer


def _vocab_sizes(tokenizer: Any) -> tuple[int, int] | None:
    if hasattr(tokenizer, "src_vocab_size") and hasattr(tokenizer, "tgt_vocab_size"):
        return int(tokenizer.src_vocab_size), int(tokenizer.tgt_vocab_size)
    if hasattr(tokenizer, "vocab_size"):
        return int(tokenizer.vocab_size), int(tokenizer.vocab_size)
    return None


def _read_json(path: Path) -> Any:
    """A JSON file of the checkpoint folder it lies in, read through the bounded reader: a regular file
    of at most limits.JSON_BYTES that no symlink leads out of the folder (a 10 GiB sparse card.json, a
    FIFO or `card.json -> /etc/shadow` is a damaged checkpoint, never a read)."""
    if not os.path.lexists(path):
        raise CheckpointError(f"{path}: file missing")
    try:
        return read_user_json(path, limits.JSON_BYTES, inside=path.parent)
    except RecursionError:
        raise CheckpointError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:                               # UserFileError too: it says what the file is
        raise CheckpointError(str(exc)) from None

