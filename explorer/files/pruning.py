"""A folder the app fills kept within a count and a size: the oldest files go first.

Why one function: the app keeps two kinds of files that nobody deletes by hand on a shared server (the
Train page's uploads, runs/uploads/, and the analyses' results, runs/heads|align|search|graphs/), and a
class that uploads, or asks for graphs, all afternoon must not fill the disk. "Oldest" is the last write
(a file written again, or touched when used again, is newest); files named in `spare` are never deleted.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterable


def prune_oldest(files: Iterable[Path], max_files: int, max_bytes: int, spare: Iterable[Path] = (),
                 on_delete: Callable[[Path], None] = lambda path: None) -> list[Path]:
    """Delete the oldest of `files` until at most `max_files` of them, `max_bytes` in all, remain (fewer
    when spared files alone exceed it); `on_delete(path)` after each deletion (a companion file's). A file
    that vanishes or cannot be deleted meanwhile is left. Returns what was deleted."""
    kept = {str(Path(p).resolve()) for p in spare}
    found = []
    for path in files:
        with contextlib.suppress(OSError):
            stat = path.stat()
            found.append((stat.st_mtime, stat.st_size, path))
    found.sort(key=lambda entry: entry[0])                       # oldest first
    count, total = len(found), sum(size for _, size, _ in found)
    deleted = []
    for _, size, path in found:
        if count <= max_files and total <= max_bytes:
            break
        if str(path.resolve()) in kept:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            count, total = count - 1, total - size
            deleted.append(path)
            on_delete(path)
    return deleted
