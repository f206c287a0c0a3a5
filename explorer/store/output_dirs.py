"""Output directories a command is allowed to replace: a new one, an empty one, or one that holds exactly
what the same command wrote there before. Nothing else, ever, is renamed aside and removed.

Why: a directory is written whole by building a hidden sibling and swapping it in
(explorer.files.atomic.write_directory), and the swap removes whatever the target held. Pointed at a
user's folder (`convert to-hf model ~/thesis`), at the Hugging Face source being imported, at a shipped
checkpoint or at the working directory's parent, that removal is data loss. So every output directory
carries a marker (MARKER: the command that wrote it and each file's size and sha256), and a command
may replace a directory only when:

* it is missing, or empty;
* its marker names the same command and the files are exactly those the marker lists (unchanged);
* with `overwrite`: its marker lists every file in it (an earlier output of one of our commands,
  edited since); a file the marker does not list means the user put it there, and it is refused
  even then.

Whatever the marker says, a command never replaces a symlink, a non-directory, the working directory
or one of its ancestors, this project's own directory or one of its ancestors, one of the command's
inputs (or a directory holding one), or a directory inside an input or inside any model folder (the source
or model would gain a folder that is not its own, which a re-export or the app's listing would then read). The check runs before anything is computed and again just before
the swap, so a refusal costs nothing and a directory filled meanwhile is not lost either.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterable

from explorer.files.atomic import recover, write_directory
from explorer.files.limits import JSON_BYTES
from explorer.files.names import OUTPUT_MARKER, PARTIAL, RUN_MARKER, RUN_STATUS, RUNS_STORES
from explorer.data.splits import default_data_dir
from explorer.files.user_files import read_user_json
from explorer.files.places import REPO_ROOT, model_folder_of
from explorer.store.run_paths import RunsDirError, runs_root, shipped_root
from explorer.store.weights import sha256

MARKER = OUTPUT_MARKER


class OutputRefused(ValueError):
    """The output directory may not be replaced; the message says why and what to do."""


def _digest(path: Path) -> str:
    return sha256(path)


def _files(directory: Path) -> list[Path]:
    """Every entry under `directory` except the marker (and PARTIAL, which a directory being built holds
    until it is swapped in): files, and symlinks and other non-directories as they are (never followed)."""
    found = []
    for root, dirs, names in os.walk(directory, followlinks=False):
        base = Path(root)
        found += [base / n for n in names]
        found += [base / d for d in dirs if (base / d).is_symlink()]
    return sorted(p for p in found if p.relative_to(directory).as_posix() not in (MARKER, PARTIAL))


def _listing(directory: Path, files: list[Path]) -> dict[str, dict]:
    return {p.relative_to(directory).as_posix(): {"size": p.stat().st_size, "sha256": _digest(p)}
            for p in files if p.is_file() and not p.is_symlink()}


def mark_output(directory: Path, tool: str) -> None:
    """Write the marker listing every file now in `directory` as written by `tool`."""
    directory = Path(directory)
    record = {"tool": tool, "files": _listing(directory, _files(directory))}
    (directory / MARKER).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")


def _read_marker(directory: Path) -> dict | None:
    try:
        record = read_user_json(directory / MARKER, JSON_BYTES, inside=directory)
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("tool"), str) and isinstance(record.get("files"), dict)
    return record if ok else None


def _is_within(path: Path, other: Path) -> bool:
    """`path` is `other` or one of its ancestors."""
    return path == other or path in other.parents


def in_shipped_folder(path: str | os.PathLike) -> Path | None:
    """The shipped checkpoints folder (run_paths.shipped_root: its models and their training-word indexes)
    when `path` is it or lies inside it, by its name as given or with symlinks followed; else None. No
    result of a command belongs there."""
    roots = {shipped_root().absolute(), Path(os.path.realpath(shipped_root()))}
    places = {Path(os.path.abspath(path)), Path(os.path.realpath(path))}
    return next((root for root in roots for place in places if place == root or root in place.parents), None)


def in_app_store(path: str | os.PathLike) -> str | None:
    """What of the app's own `path` is or lies inside, by its name as given or with symlinks followed: one of
    the runs folder's stores (names.RUNS_STORES: `graph --out` named a dictionary's cfg.json there and
    replaced the dictionary it had just read), a training run's folder (a folder of the runs folder with
    the trainer's status.json, or any folder with the trainer's mark: its status and curves), or a corpus
    built in the data folder; None else. No analysis's result belongs there. (Not holds_run: a folder with
    checkpoints/ is also this project's own checkout, where analyses write their default --out.)"""
    places = {Path(os.path.abspath(path)), Path(os.path.realpath(path))}
    try:
        runs = {runs_root(), Path(os.path.realpath(runs_root()))}
    except RunsDirError:
        runs = set()
    for root in runs:
        for place in places:
            if root not in place.parents:
                continue
            top = root / place.relative_to(root).parts[0]                   # runs/<name>
            if top.name in RUNS_STORES:
                return f"the app's {top.name} folder {top} ({RUNS_STORES[top.name]})"
            if _is_file(top / RUN_STATUS) or _is_file(top / RUN_MARKER):
                return f"the training run {top}"
    for place in places:
        marked = next((folder for folder in (place, *place.parents) if _is_file(folder / RUN_MARKER)), None)
        if marked is not None:
            return f"the training run {marked}"
    for root in {Path(os.path.abspath(default_data_dir())), Path(os.path.realpath(default_data_dir()))}:
        for place in places:                   # data/<corpus>/: a built corpus (`graph --out` replaced its train.tsv)
            if root in place.parents and len(place.relative_to(root).parts) > 1:
                return f"the corpus cache {root / place.relative_to(root).parts[0]}"
    return None


def _is_file(path: Path) -> bool:
    """Path.is_file, False where the path cannot be looked at (a name too long, a folder not ours to read)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _never(target: Path, resolved: Path, inputs: Iterable[str | os.PathLike]) -> str | None:
    """Why `target` may never be replaced, whatever its contents; None if it may be, given them."""
    if target.is_symlink():
        return f"{target} is a symbolic link; name the directory itself or a new path"
    if target.exists() and not target.is_dir():
        return f"{target} exists and is not a directory"
    if _is_within(resolved, Path.cwd().resolve()):
        return f"{target} is the working directory or one of its ancestors"
    if _is_within(resolved, REPO_ROOT):
        return f"{target} is this project's directory or one of its ancestors"
    for given in inputs:
        if _is_within(resolved, Path(given).resolve()):
            return f"{target} is this command's input ({given}) or holds it"
        if Path(given).resolve() in resolved.parents:     # the source would gain a folder that is not its own
            return f"{target} is inside {given}, the source being read; nothing is written inside a source"
    folder = model_folder_of(resolved.parent)
    if folder is not None:                # a model gains a folder that is not its own (the catalog, a re-export read it)
        return f"{target} is inside the model folder {folder}; nothing is written inside a model"
    return None


def check_output_dir(target: str | os.PathLike, tool: str, *, overwrite: bool = False,
                     inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """`target` if `tool` may write it (see the module's rules); otherwise OutputRefused saying why."""
    target = Path(target)
    resolved = target.resolve()
    never = _never(target, resolved, list(inputs))
    if never:
        raise OutputRefused(f"{never}; refusing to replace it")
    if not target.exists():
        return target
    if not any(target.iterdir()):
        return target                                                 # empty: nothing to lose
    files = _files(target)
    marker = _read_marker(target)
    listed = set(marker["files"]) if marker else set()
    foreign = [p.relative_to(target).as_posix() for p in files if p.relative_to(target).as_posix() not in listed]
    if marker is None and not foreign:                                # only (empty) folders: still the user's
        foreign = sorted(p.name for p in target.iterdir())
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputRefused(f"{target} holds files {tool} did not write ({shown}); refusing to replace it "
                            "(even with --overwrite): choose a new or empty directory")
    if overwrite or (marker["tool"] == tool and _listing(target, files) == marker["files"]):
        return target
    why = (f"was written by {marker['tool']}" if marker["tool"] != tool
           else "was changed since it was written")
    raise OutputRefused(f"{target} {why}; pass --overwrite to replace it, or choose a new directory")


def write_output_dir(target: str | os.PathLike, tool: str, write: Callable[[Path], None], *,
                     overwrite: bool = False, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """write(tmp) fills a new directory that is marked and swapped in for `target` (atomically: see
    explorer.files.atomic.write_directory), checked as check_output_dir before and just before the swap.
    What an interrupted earlier write left is finished only after the first check, and only where it
    carries this module's marker (explorer.files.atomic.recover)."""
    inputs = list(inputs)
    target = check_output_dir(target, tool, overwrite=overwrite, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target, MARKER)             # after the check: only our own marked copies and partial builds
    def write_marked(tmp: Path) -> None:
        write(tmp)
        mark_output(tmp, tool)

    return write_directory(target, write_marked,
                           before_swap=lambda: check_output_dir(target, tool, overwrite=overwrite, inputs=inputs))
