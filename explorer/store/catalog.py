"""Listing checkpoints cheaply, and honestly: a damaged directory is listed with `error` set.

Used by the app's sidebar and Checkpoints page every 30 seconds, so it must be fast and must never
raise, whatever a directory holds (a hostile config.json included). Every listing reads config.json,
card.json and the safetensors header, and checks the header against the config (parameter count,
names, shapes) without allocating what the config claims. Once per version of a weights file
(path, size, mtime) it also reads the weights: the sha256 in config.json, NaN or infinite values,
and whether the tokenizer loads and fits the model. A symlink that leads out of its root is not
followed.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from explorer.files.atomic import asides
from explorer.store.checkpoint import (CONFIG, WEIGHTS, CheckpointError, read_card, read_config,
                                       read_weights_header, resolve, verify_contents)
from explorer.model import model_skeleton
from explorer.store.weights import check_size, checked_state


@dataclass
class CheckpointInfo:
    name: str
    path: Path
    meta: dict = field(default_factory=dict)
    card: dict | None = None
    n_params: int | None = None
    size_bytes: int = 0
    created: str | None = None
    error: str | None = None    # set (and the rest best-effort) for a damaged directory


def list_checkpoints(*roots: str | os.PathLike) -> list[CheckpointInfo]:
    """Checkpoint directories (holding config.json) up to 4 levels under each root (runs/<run>/checkpoints/
    step_N is 3; the poisoned-pairs demonstration keeps its two runs one level further, in its folder).

    Cheap: reads config.json, card.json and the safetensors header, never the weights. A damaged
    directory is listed with `error` set instead of raising.
    """
    found: list[CheckpointInfo] = []
    for root in roots or ("checkpoints",):
        root = Path(root)
        for path in _find_dirs(root, depth=4, inside=root.resolve()):
            found.append(_info(root, path))
    return sorted(found, key=lambda i: str(i.path))


def _find_dirs(path: Path, depth: int, inside: Path) -> list[Path]:
    if not path.is_dir() or (path.is_symlink() and not path.resolve().is_relative_to(inside)):
        return []
    if (path / CONFIG).is_file() or asides(path):
        return [path]
    if depth == 0:
        return []
    out: list[Path] = []
    try:
        children = sorted(path.iterdir())
    except OSError:
        return []
    for child in children:
        if child.name.startswith("."):
            target = _aside_target(child)
            if target is not None and not target.exists():
                out.append(target)          # an interrupted save: its old copy still loads
            continue
        if child.is_dir():
            out.extend(_find_dirs(child, depth - 1, inside))
    return out


def _aside_target(path: Path) -> Path | None:
    if ".old-" not in path.name or not (path / CONFIG).is_file():
        return None
    return path.parent / path.name[1:].split(".old-", 1)[0]


def _info(root: Path, path: Path) -> CheckpointInfo:
    rel = path.relative_to(root).as_posix() if path != root else path.name
    info = CheckpointInfo(name=rel, path=path)
    try:
        real = resolve(path)
        info.size_bytes = sum(f.stat().st_size for f in real.iterdir() if f.is_file())
        info.created = datetime.fromtimestamp(real.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
        info.meta, cfg = read_config(real)
        info.name = info.meta.get("name") or rel
        info.created = info.meta.get("created") or info.created
        info.card = read_card(real)
        header = read_weights_header(real)
        check_size(cfg, header, real / WEIGHTS)                 # before the skeleton: nothing sized by the config
        skeleton = model_skeleton(cfg)
        checked_state(skeleton, header, real / WEIGHTS)
        error = _contents_error(str(real), _file_versions(real))  # reads the weights: once per file version
        if error:
            raise CheckpointError(error)
        info.n_params = skeleton.num_parameters()
    except CheckpointError as exc:
        info.error = str(exc)
    except OSError as exc:
        info.error = f"{path}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a listing never raises, whatever the directory holds
        info.error = f"{path}: cannot be read ({type(exc).__name__}: {exc})"
    return info


def _file_versions(path: Path) -> tuple:
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir() if f.is_file()))


@functools.lru_cache(maxsize=1024)
def _contents_error(path: str, versions: tuple) -> str | None:
    """verify_contents() once per version of a checkpoint's files (`versions`: names, sizes, mtimes)."""
    try:
        meta, cfg = read_config(path)
        verify_contents(path, meta, cfg)
    except CheckpointError as exc:
        return str(exc)
    return None
