"""What `train --overwrite` may remove: only what a trainer provably wrote, checked whole before
anything goes.

Why: starting a run over removes its checkpoints, tokenizer, status, metrics and settings, and
`--run-dir` may name any folder: a project folder with a `checkpoints/` subfolder of the user's own
models looks like a run from outside. So a run directory carries the trainer's mark (RUN_MARKER,
written when a trainer first sets up there: explorer.training.trainer), and clearing it removes
only entries whose names and contents are the trainer's:

* checkpoints/: `step_<N>` checkpoint folders (config.json of this format, only checkpoint files, no
  subfolders) and the hidden debris of their interrupted saves (`.step_<N>.tmp-<pid>-<hex>`,
  `.step_<N>.old-<pid>-<hex>`);
* tokenizer/: the tokenizer's own files (and the hidden temp files of their atomic writes);
* status.json, metrics.jsonl, train_config.json as regular files.

Anything else there (a folder of the user's in checkpoints/, a symlink, a notes file in tokenizer/), or
no mark at all, refuses the whole clearing with the entries named; nothing is removed. train.log and
the mark stay.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from explorer.files import names
from explorer.files.atomic import temp_file_pid, write_json_atomic
from explorer.files.limits import JSON_BYTES
from explorer.files.user_files import read_user_json

TRAINER = "explorer train"
_STEP = r"step_\d+"
_STEP_DIR = re.compile(_STEP)
_STEP_DEBRIS = re.compile(rf"\.{_STEP}\.(tmp|old)-\d+-[0-9a-f]{{8}}")
_CHECKPOINT_FILES = {names.CONFIG, names.WEIGHTS, names.CARD, names.TRAINER_STATE, names.TEST_SPLIT,
                     names.OUTPUT_MARKER, names.JOINT_TOKENIZER, names.SRC_TOKENIZER, names.TGT_TOKENIZER,
                     names.MARIAN_SRC_SPM, names.MARIAN_TGT_SPM, names.MARIAN_VOCAB, names.MARIAN_TGT_VOCAB}
_TOKENIZER_FILES = {names.JOINT_TOKENIZER, names.SRC_TOKENIZER, names.TGT_TOKENIZER}
_RUN_FILES = (names.RUN_STATUS, names.RUN_METRICS, names.RUN_CONFIG)


class RunRefused(ValueError):
    """The run directory holds something the trainer did not write; the message names it."""


# What a trainer, or the app's launch of one, writes at the top of a run folder (the one list: train's check of
# --run-dir, the poisoned-pairs demonstration's check of its runs, never_started)
TOP_FILES = (names.RUN_MARKER, names.RUN_STATUS, names.RUN_METRICS, names.RUN_CONFIG, names.RUN_LOG, names.RUN_LOCK)
TOP_FOLDERS = (names.RUN_CHECKPOINTS, names.RUN_TOKENIZER)


def trainer_entry(path: Path, files: tuple[str, ...] = TOP_FILES) -> bool:
    """`path`, at the top of a run folder, is what the trainer writes there: one of its folders, or one of
    `files` (or the temp file of an atomic write of one, which a killed write leaves) as a plain file."""
    if path.name in TOP_FOLDERS and files is TOP_FILES:
        return path.is_dir() and not path.is_symlink()
    return not path.is_symlink() and path.is_file() and (path.name in files or _temp_of(path.name, set(files)))


def never_started(run_dir: Path) -> bool:
    """A run folder a trainer stopped in before it set up (Ctrl-C, or a refusal, while it loaded): no mark,
    nothing but status.json, trainer.lock and train.log. Its status.json may go before a run starts there
    (the trainer clears only a marked run, and refuses to mix a new one with an old status)."""
    allowed = (names.RUN_STATUS, names.RUN_LOCK, names.RUN_LOG)
    return run_dir.is_dir() and not is_marked(run_dir) and all(trainer_entry(e, allowed) for e in run_dir.iterdir())


def mark_run(run_dir: Path) -> None:
    """Leave the trainer's mark in `run_dir` (once: an existing mark is kept)."""
    marker = Path(run_dir) / names.RUN_MARKER
    if not marker.exists():
        write_json_atomic(marker, {"tool": TRAINER})


def is_marked(run_dir: Path) -> bool:
    try:
        record = read_user_json(Path(run_dir) / names.RUN_MARKER, JSON_BYTES, inside=run_dir)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("tool") == TRAINER


def _temp_of(name: str, allowed: set[str]) -> bool:
    """A hidden temp file of an atomic write of one of `allowed` (explorer.files.atomic.replacing)."""
    return any(temp_file_pid(name, a) is not None for a in allowed)


def _is_checkpoint_dir(path: Path) -> bool:
    """A step checkpoint as the trainer writes it: only checkpoint files, config.json of this format."""
    if path.is_symlink() or not path.is_dir():
        return False
    entries = list(path.iterdir())
    if any(e.is_symlink() or not e.is_file() or e.name not in _CHECKPOINT_FILES for e in entries):
        return False
    try:
        config = read_user_json(path / names.CONFIG, JSON_BYTES, inside=path)
    except (OSError, ValueError, RecursionError):
        return not entries                  # an empty step folder: a save killed before it wrote
    return isinstance(config, dict) and isinstance(config.get("format_version"), int)


def _checkpoint_entries(folder: Path) -> tuple[list[Path], list[str]]:
    """(entries of checkpoints/ the trainer wrote, names of those it did not)."""
    ours, foreign = [], []
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if _STEP_DIR.fullmatch(name) and _is_checkpoint_dir(entry):
            ours.append(entry)
        elif _STEP_DEBRIS.fullmatch(name) and not entry.is_symlink() and entry.is_dir():
            ours.append(entry)
        else:
            foreign.append(f"{folder.name}/{name}")
    return ours, foreign


def _tokenizer_entries(folder: Path) -> tuple[list[Path], list[str]]:
    ours, foreign = [], []
    for entry in sorted(folder.iterdir()):
        if not entry.is_symlink() and entry.is_file() and (entry.name in _TOKENIZER_FILES
                                                            or _temp_of(entry.name, _TOKENIZER_FILES)):
            ours.append(entry)
        else:
            foreign.append(f"{folder.name}/{entry.name}")
    return ours, foreign


def clearing_plan(run_dir: Path) -> list[Path]:
    """Every path `clear_run` would remove; RunRefused (nothing removed) when the folder lacks the
    trainer's mark or holds anything the trainer did not write where it would clear."""
    run_dir = Path(run_dir)
    if not is_marked(run_dir):
        raise RunRefused(f"{run_dir} was not written by this project's trainer (it has no {names.RUN_MARKER}); "
                         "refusing to remove anything in it: choose a new --run-dir")
    plan: list[Path] = []
    foreign: list[str] = []
    for name, sort in ((names.RUN_CHECKPOINTS, _checkpoint_entries), (names.RUN_TOKENIZER, _tokenizer_entries)):
        folder = run_dir / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            foreign.append(name)
        elif folder.is_dir():
            ours, theirs = sort(folder)
            plan += ours
            foreign += theirs
    for name in _RUN_FILES:
        path = run_dir / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            foreign.append(name)
        elif path.exists():
            plan.append(path)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise RunRefused(f"{run_dir} holds files the trainer did not write ({shown}); refusing to start "
                         "over there (nothing was removed): choose a new --run-dir")
    return plan


def clear_run(run_dir: Path) -> None:
    """Remove a previous run's files before starting over (clearing_plan's list, checked whole first),
    then the emptied checkpoints/ and tokenizer/ folders. Only the trainer holding the run's lock calls it."""
    run_dir = Path(run_dir)
    for path in clearing_plan(run_dir):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for name in (names.RUN_CHECKPOINTS, names.RUN_TOKENIZER):
        try:
            (run_dir / name).rmdir()                        # only when empty
        except OSError:
            pass

