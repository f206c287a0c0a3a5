"""Other processes and the machine, read through psutil so that the same code answers on Linux, macOS and
the BSDs (it read Linux's /proc alone: elsewhere a live trainer went unseen and the memory check was skipped).

Each answer is None when the system does not say: the process is gone, belongs to another user, or the
platform keeps it to itself. Callers then do what they did without it (skip a check, signal one pid).
"""
from __future__ import annotations

import psutil


def command_line(pid: int) -> list[str] | None:
    """The argv `pid` was started with, or None when it is gone or cannot be read."""
    try:
        return psutil.Process(pid).cmdline()
    except (psutil.Error, OSError, ValueError):          # NoSuchProcess, AccessDenied, ZombieProcess; a bad pid
        return None


def working_folder(pid: int) -> str | None:
    """The folder `pid` runs in (what its relative paths are relative to), or None when unknown."""
    try:
        return psutil.Process(pid).cwd() or None
    except (psutil.Error, OSError, ValueError):
        return None


def available_memory_bytes() -> int | None:
    """Memory a new allocation can still use: free memory plus what the kernel can reclaim without
    swapping (Linux's MemAvailable; the same estimate elsewhere), or None when it cannot be read."""
    try:
        return int(psutil.virtual_memory().available)
    except (psutil.Error, OSError, RuntimeError, ValueError):
        return None
