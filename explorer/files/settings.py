"""What a setting from outside may name, checked where it is read: the memory one model may take
($EXPLORER_MAX_MODEL_BYTES: max_model_bytes) and the check every folder setting gets ($EXPLORER_RUNS_DIR,
$EXPLORER_DATA_DIR, a --data-dir: folder_problem), with the byte sizes their messages print (size_text).
In this floor so that the data and the store floors can both read them.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from explorer.files.limits import whole_number

# The memory one model's load (or import) may take at its peak, counted from the config and the weights'
# header before anything is allocated (explorer.store.weights.load_bytes): OPUS-MT base (74M parameters)
# needs ~0.3 GiB to load, the paper's big model ~0.8 GiB; a server keeps up to 4 models, plus private
# copies for background analyses. $EXPLORER_MAX_MODEL_BYTES sets another bound (a number of bytes).
MAX_MODEL_BYTES = 2 << 30
MAX_MODEL_BYTES_ENV = "EXPLORER_MAX_MODEL_BYTES"


_warned_bounds: set[str] = set()          # the $EXPLORER_MAX_MODEL_BYTES values already warned about


def max_model_bytes() -> int:
    """$EXPLORER_MAX_MODEL_BYTES when it holds a whole number of bytes of at least 1 (up to 18 digits:
    files.limits.whole_number; a small one is a bound too, which tests use), else MAX_MODEL_BYTES. A value that is set but is not one (abc, 0, -1, 1e3,
    ², 10**30) is not a bound anyone meant: one `warning:` line on stderr, once per value (this is read at
    every load), names it and the bound used instead, rather than a silent 2 GiB."""
    text = os.environ.get(MAX_MODEL_BYTES_ENV, "")
    given = whole_number(text)
    if given:
        return given
    if text.strip() and text not in _warned_bounds:
        _warned_bounds.add(text)
        shown = text if text.isprintable() and len(text) <= 40 else repr(text[:40]) + ("..." if len(text) > 40 else "")
        print(f"warning: {MAX_MODEL_BYTES_ENV}={shown} is not a whole number of bytes (1 or more, at most 18 "
              f"digits); using {size_text(MAX_MODEL_BYTES)} (MAX_MODEL_BYTES in explorer/files/settings.py)",
              file=sys.stderr, flush=True)
    return MAX_MODEL_BYTES


def size_text(n_bytes: int | float) -> str:
    """A number of bytes in the unit that shows it: 2.00 GiB, 8.6 MiB, 1.0 KiB, 100 bytes (a bound of
    100 bytes printed in GiB read "0.00 GiB")."""
    for unit, shift, digits in (("GiB", 30, 2), ("MiB", 20, 1), ("KiB", 10, 1)):
        if abs(n_bytes) >= 1 << shift:
            return f"{n_bytes / (1 << shift):,.{digits}f} {unit}"
    return f"{int(n_bytes):,} bytes"


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why `path`, named by a folder setting ($EXPLORER_RUNS_DIR, $EXPLORER_DATA_DIR, a --data-dir), cannot
    hold files: it, or the nearest part of it that exists, is not a folder (a regular file, /dev/null),
    which every write under it would meet as a NotADirectoryError traceback. None when it is a folder or
    can be made one (nothing there yet). The one check both settings' readers make
    (explorer.store.run_paths.runs_root, explorer.data.splits.data_folder)."""
    given = os.path.abspath(os.fspath(path))
    for part in (given, *map(str, Path(given).parents)):
        if not os.path.lexists(part):
            continue
        if os.path.isdir(part):
            return None
        kind = ("a regular file" if os.path.isfile(part) else "a symbolic link to nothing" if not os.path.exists(part)
                else "a device, FIFO or socket")
        return f"{kind}, not a folder" if part == given else f"{part}, a part of it, is {kind}, not a folder"
    return None
