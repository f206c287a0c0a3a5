"""The server process's memory over a lesson: glibc's allocator told to give freed memory back.

Streamlit runs every script run in a new thread, and glibc's malloc gives threads their own arenas
(up to 8 per core), each keeping the memory freed in it for reuse by that arena alone; pages drawn
and results computed and dropped then leave resident memory that no later session can use, so the
process grows with the number of sessions seen rather than with what it holds. Two settings of
glibc's own (mallopt(3), malloc_trim(3)) bound that: at most ARENAS arenas, and every TRIM_EVERY_S
seconds the free memory at the top of each arena and whole free pages inside it go back to the
system. Best effort: on a C library without them (not glibc) nothing changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time
from functools import cache

M_ARENA_MAX = -8            # mallopt's parameter number (malloc.h)
ARENAS = 2                  # one per core of the machine this app is made for; the main arena included
TRIM_EVERY_S = 5.0          # a collection costs ~15-50 ms once gc.freeze() has set the libraries aside


@cache
def tune_allocator() -> bool:
    """Once per process: limit the arenas and start the trimming thread. True when glibc took it."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        libc.mallopt(M_ARENA_MAX, ARENAS)
    except (AttributeError, OSError):
        return False
    threading.Thread(target=_trim_forever, args=(libc,), daemon=True, name="malloc-trim").start()
    return True


def trim() -> bool:
    """Give free memory back to the system now (malloc_trim(0)); True when some was released."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def _trim_forever(libc) -> None:
    time.sleep(TRIM_EVERY_S)
    gc.collect()
    gc.freeze()               # what the first page loaded (torch, plotly, pandas: ~300k objects) lives as
    while True:               # long as the process: later full collections skip it, ~0.2 s -> a few ms
        time.sleep(TRIM_EVERY_S)
        gc.collect()          # closed sessions are reference cycles; the app runs no collection per rerun
        try:
            libc.malloc_trim(0)
        except OSError:
            return


@cache
def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None
