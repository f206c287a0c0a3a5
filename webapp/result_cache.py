"""Results shared by every session of the app, memoised in memory bounded in bytes.

st.cache_data bounds a cache by its number of entries only: 256 attention traces of 2,000-character
sentences (~43 MB each) would have been allowed ~11 GB. A `bounded_cache` is an LRU cache
(cachetools) of pickled results, so its bound is in bytes and exact: the memory a cache holds is
the sum of its entries' lengths (a live result is larger: Python lists of floats take ~4x their
pickle). The least recently used results go first, and a result larger than the whole bound is
computed and returned but not kept. Each call gets its own copy (unpickled, as st.cache_data does),
so a page that changes a result in place cannot change what another user sees.
"""
from __future__ import annotations

import functools
import inspect
import json
import pickle
import threading
from typing import Any, Callable

import cachetools


def _plain(value: Any) -> Any:
    """How an argument that is not plain data enters a key: by its `cache_key` (a loaded checkpoint:
    its path and weights hash, never the model itself, and a multilingual one's language pair), else
    its repr."""
    key = getattr(value, "cache_key", None)
    return list(key) + list(getattr(value, "language_pair", ())) if key is not None else repr(value)


def _key(*args: Any, **kwargs: Any) -> str:
    """Arguments as one string; dicts (decoding settings) and tuples are fine, key order is not."""
    return json.dumps([args, kwargs], sort_keys=True, default=_plain)


def bounded_cache(max_bytes: int) -> Callable[[Callable], Callable]:
    """Memoise a function in an LRU cache of at most `max_bytes` (pickled sizes of the results).

    The wrapper has `.cache` (the cachetools.LRUCache of pickles: .currsize, .maxsize), `.clear()` and
    `.holds(*args, **kwargs)`: whether a call with these arguments would be answered from the cache
    (a page shows a costly result without asking for a button press when some session computed it).
    Exceptions are not cached. Thread-safe: the cache is touched under a lock, the function runs
    outside it, and once per key at a time: sessions asking for a result that is being computed
    wait for it instead of computing it again (a class opening the app at once computes the
    opening example once, not once per student). If the computation fails, or its result is too
    large to keep, the next waiter computes it itself.
    """
    def decorate(fn: Callable) -> Callable:
        cache = cachetools.LRUCache(maxsize=max_bytes, getsizeof=len)
        lock = threading.Lock()
        computing: dict[str, threading.Event] = {}
        signature = inspect.signature(fn)

        def key_of(args: tuple, kwargs: dict) -> str:
            """One key however a call spells its arguments: by position or by name, a default left out or
            passed (the Translate page's `int8=False` and the Beam page's call without it are one call)."""
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return _key(**bound.arguments)

        def memo(*args: Any, **kwargs: Any) -> Any:
            key = key_of(args, kwargs)
            while True:
                with lock:
                    blob = cache.get(key)
                    pending = computing.get(key) if blob is None else None
                    if blob is None and pending is None:
                        computing[key] = done = threading.Event()
                        break
                if blob is not None:
                    return pickle.loads(blob)         # the caller's own copy
                pending.wait()                    # someone else is computing it: wait, then look again
            try:
                value = fn(*args, **kwargs)
                blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                with lock:
                    try:
                        cache[key] = blob
                    except ValueError:            # larger than the whole bound: returned, not kept
                        pass
                return value                      # the cache holds only the pickle: this copy is the caller's
            finally:
                with lock:
                    computing.pop(key, None)
                done.set()

        wrapper = functools.wraps(fn)(memo)

        def clear() -> None:
            with lock:
                cache.clear()

        def holds(*args: Any, **kwargs: Any) -> bool:
            key = key_of(args, kwargs)
            with lock:
                return key in cache               # a look only: the entry's place in the LRU order is kept

        wrapper.cache, wrapper.clear, wrapper.holds = cache, clear, holds
        return wrapper
    return decorate
