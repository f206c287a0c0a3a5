"""The app's server process gives freed memory back (webapp/process_memory.py): glibc is told once,
one background thread collects and trims, and trimming is callable on its own."""
import ctypes.util
import gc
import threading

import pytest

from webapp import process_memory

glibc = pytest.mark.skipif(ctypes.util.find_library("c") is None, reason="needs a C library")


@glibc
def test_tuning_happens_once_with_one_trimming_thread(monkeypatch):
    monkeypatch.setattr(process_memory, "TRIM_EVERY_S", 0.05)
    process_memory.tune_allocator.cache_clear()
    before = [t for t in threading.enumerate() if t.name == "malloc-trim"]
    try:
        assert process_memory.tune_allocator() is True
        assert process_memory.tune_allocator() is True            # a second script run: nothing new
        trimmers = [t for t in threading.enumerate() if t.name == "malloc-trim"]
        assert len(trimmers) == len(before) + 1 and all(t.daemon for t in trimmers)
    finally:
        gc.unfreeze()                                             # the thread froze this test process's objects


@glibc
def test_trim_gives_freed_pages_back():
    blocks = [bytearray(64 << 10) for _ in range(800)]            # ~50 MB in the heap, below mmap's threshold
    del blocks[:-1]                                               # freed: the top of the heap is free memory
    assert process_memory.trim() is True
