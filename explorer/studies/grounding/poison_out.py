"""Where the poisoned-pairs demonstration (poison.py) may write: its --out folder checked before any work.

The folder must be new, empty, or an earlier output of the command: only its three files (poisoned.tsv
and clean.tsv as it writes them, report.json with the report's keys) and its two run folders holding only
what the project's trainer writes at their top (clearing_plan checks inside checkpoints/ and tokenizer/).
Anything else (an empty name, a file, a symlink, a checkpoint or run folder or one inside it, a folder of
other files, the working directory or the project's folder or one holding them, a run another trainer is
writing) is refused with OutRefused, whose one line says why and what to do. Reads and probes only.
"""
from __future__ import annotations

import os
from pathlib import Path

from explorer.files.atomic import read_json_object, temp_file_pid
from explorer.files import names
from explorer.files.names import POISON_FILES
from explorer.files.places import REPO_ROOT, model_folder_of
from explorer.files.user_files import UserFileError, check_output_file, read_user_file
from explorer.store import run_files as rf
from explorer.store.run_clearing import RunRefused, clearing_plan, is_marked, never_started, trainer_entry
from explorer.store.output_dirs import in_shipped_folder
from explorer.store.run_paths import holds_run, runs_root

POISONED_TSV, CLEAN_TSV, REPORT = POISON_FILES
RUNS = ("poisoned", "clean")            # the two fine-tunes' run folders, inside --out
DEFAULT_OUT = names.POISON_DEMO         # in the runs folder (runs_root)
_TSV_HEADER = b"src\ttgt\n"             # what poison.write_tsv starts every file with
_TSV_BYTES = 16 << 20                   # far above the demonstration's files (about 40 KB)
_REPORT_KEYS = ("clean_pairs", "poisoned_pairs", "steps", "held_out")


class OutRefused(ValueError):
    """--out cannot be used; the message says why and what to do."""


def default_out() -> Path:
    """Where the demonstration goes without --out: poison-demo in the runs folder."""
    return runs_root() / DEFAULT_OUT


def _ours(path: Path, files: tuple[str, ...]) -> bool:
    """`path` (a plain file) is one of `files` or the temp file of an atomic write of one."""
    return not path.is_symlink() and path.is_file() and (
        path.name in files or any(temp_file_pid(path.name, f) is not None for f in files))


def _demo_file(path: Path) -> bool:
    """`path` is a file this command writes at the top of its --out, as it writes it."""
    if path.name == REPORT and _ours(path, (REPORT,)):
        return read_json_object(path, _REPORT_KEYS) is not None
    if path.name in (POISONED_TSV, CLEAN_TSV) and _ours(path, (path.name,)):
        try:
            return read_user_file(path, _TSV_BYTES).startswith(_TSV_HEADER)
        except (OSError, ValueError):
            return False
    return _ours(path, POISON_FILES) and path.name not in POISON_FILES


def _foreign(out: Path) -> list[str]:
    """What `out` holds that this command did not write there (its files, its two runs' folders and the
    trainer's names at their top; clearing_plan checks inside checkpoints/ and tokenizer/)."""
    foreign = []
    for entry in sorted(out.iterdir()):
        if entry.name in RUNS and entry.is_dir() and not entry.is_symlink():
            foreign += [f"{entry.name}/{e.name}" for e in sorted(entry.iterdir()) if not trainer_entry(e)]
        elif not _demo_file(entry):
            foreign.append(entry.name)
    return foreign


def _check_writable(given: str, shown: str) -> None:
    """A folder can be made at `given` (or files written in it): the nearest existing folder on the way
    there, symlinks not followed to find it, takes a file. A symlink to nothing on the way is refused:
    following it would make folders wherever it points."""
    lexical = Path(os.path.abspath(given))
    existing = lexical
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        raise OutRefused(f"--out {shown}: {_cut(str(existing))} is a symbolic link to nothing; name another folder")
    if not existing.is_dir():
        raise OutRefused(f"--out {shown}: {_cut(str(existing))} is not a folder")
    probe = existing / (lexical.relative_to(existing).parts[0] if existing != lexical else REPORT)
    try:
        check_output_file(probe)
    except UserFileError as err:
        raise OutRefused(f"--out {shown}: {_cut(str(err))}") from None


def _cut(text: str, limit: int = 200) -> str:
    """A name as a message shows it: at most `limit` characters (a path may be thousands long)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def check_out(given: str) -> Path:
    """The --out folder, resolved, when the demonstration may write there (see the module docstring);
    OutRefused saying why otherwise. Reads and probes only: nothing is made or removed."""
    try:
        return _check_out(given)
    except OSError as err:                  # a name too long, a folder that cannot be listed, ...
        raise OutRefused(f"--out {_cut(given)}: cannot be used ({err.strerror or err})") from None


def _check_out(given: str) -> Path:
    if not given.strip():
        raise OutRefused(f"--out is empty: name a new folder (default {default_out()})")
    out, shown = Path(given), _cut(given)
    if out.is_symlink():
        raise OutRefused(f"--out {shown} is a symbolic link; name the folder itself or a new one")
    if out.exists() and not out.is_dir():
        raise OutRefused(f"--out {shown} exists and is not a folder; name a new or empty folder")
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise OutRefused(f"--out {shown} is the working directory or holds it; name a new folder")
    if resolved == REPO_ROOT or resolved in REPO_ROOT.parents:
        raise OutRefused(f"--out {shown} is this project's folder or holds it; name a new folder")
    shipped = in_shipped_folder(given)
    if shipped is not None:                # the app would list its two fine-tunes among the shipped models
        raise OutRefused(f"--out {shown} lies inside the shipped checkpoints folder {_cut(str(shipped))}; "
                         "name a new folder outside it")
    folder = model_folder_of(resolved)
    if folder is not None:
        where = ("is a checkpoint folder" if folder == resolved
                 else f"lies inside the checkpoint folder {_cut(str(folder))}")
        raise OutRefused(f"--out {shown} {where}; name a new folder")
    # this project's folder holds the shipped checkpoints/, no run: the default --out lies inside it
    run = next((f for f in resolved.parents if f != REPO_ROOT and (holds_run(f) or is_marked(f))), None)
    if run is not None:                   # a training run's folder gains nothing the trainer did not write
        raise OutRefused(f"--out {shown} lies inside the training run {_cut(str(run))}; name a new folder")
    if resolved.is_dir() and any(resolved.iterdir()):
        if holds_run(resolved):
            raise OutRefused(f"--out {shown} holds a training run (status.json or checkpoints/); name a new folder")
        foreign = _foreign(resolved)
        if foreign:
            listed = _cut(", ".join(foreign[:5])) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise OutRefused(f"--out {shown} holds files this command did not write ({listed}); refusing to write "
                             "into it: name a new or empty folder")
        for name in RUNS:
            run_dir = resolved / name
            if rf.RunLock(run_dir).is_held_by_other():
                raise OutRefused(f"--out {shown}: a trainer is running in {run_dir} (another poison "
                                 "demonstration?); wait for it or name another folder")
            if holds_run(run_dir) and not never_started(run_dir):
                try:
                    clearing_plan(run_dir)         # what starting it over would remove: only the trainer's
                except RunRefused as err:
                    raise OutRefused(f"--out {shown}: {err}") from None
    _check_writable(given, shown)
    return resolved
