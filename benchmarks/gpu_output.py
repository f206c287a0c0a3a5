"""Where the GPU check writes: its --out folder, under the project's output-directory protection.

The check writes one JSON file per group of stages as each stage ends (so a call cut off at its time
limit still leaves every finished stage's figures), into a folder a user names. A folder of the user's
that happens to hold a summary.json must not lose it, so the folder goes through the same rule as every
command that writes a directory (explorer.store.output_dirs): a new folder, an empty one, or one this
command wrote before (its marker lists every file, unchanged; --overwrite: edited since), else refused
before anything runs. An earlier output of this command is emptied of the files its marker lists
before the new run, so no stale group file (from a run of other stages) sits beside the new ones; the
marker is then rewritten after every file the check writes, so the folder is recognised as the check's
at every moment.

Places that cannot hold the output (a file, /dev/null, a folder under /proc or /sys, a read-only place)
are refused the same way, with one line, before any computation: the folder is created and a probe
file written and removed there first.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from explorer.files.atomic import write_json_atomic
from explorer.store.output_dirs import MARKER, OutputRefused, check_output_dir, mark_output

TOOL = "python -m benchmarks gpu"
DEFAULT_OUT = "bench-results/gpu-check"          # bench-results/ is in .gitignore: a checkout stays clean


def prepare_out(target: str | os.PathLike, overwrite: bool = False) -> Path:
    """The --out folder, ready to write: checked (OutputRefused saying why, in one line), created, shown
    writable, emptied of this command's earlier files, and marked as this command's."""
    out = check_output_dir(target, TOOL, overwrite=overwrite)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".probe-"):
            pass
    except OSError as err:
        raise OutputRefused(f"{target} cannot hold the check's files: {err.strerror or err}") from None
    for name in _earlier_files(out):
        (out / name).unlink(missing_ok=True)
    mark_output(out, TOOL)
    return out


def _earlier_files(out: Path) -> list[str]:
    """The files this command's marker in `out` lists (check_output_dir has shown they are its own)."""
    try:
        record = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    names = record.get("files") if isinstance(record, dict) else None
    if not isinstance(names, dict):
        return []
    return [n for n in names if "/" not in n and n not in ("", ".", "..", MARKER) and (out / n).is_file()]


def write_result(out: Path, name: str, data: dict) -> None:
    """One JSON file of the check, written whole (atomically), then the marker brought up to date."""
    write_json_atomic(out / name, data)
    mark_output(out, TOOL)
