"""The app's shared result caches are bounded in bytes, not entries (webapp/result_cache.py)."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from webapp.result_cache import bounded_cache

MIB = 1 << 20


def test_the_cache_keeps_its_byte_bound_and_drops_the_least_recently_used():
    calls = []

    @bounded_cache(max_bytes=10 * MIB)
    def trace(n: int, settings: dict) -> np.ndarray:
        calls.append(n)
        return np.full(MIB // 8, n, dtype=np.float64)                # ~1 MiB each

    for n in range(30):
        trace(n, {"beam": 5, "alpha": 0.6})
        assert trace.cache.currsize <= 10 * MIB
    assert len(trace.cache) == 9                                      # 9 x (1 MiB + pickle header) fit
    calls.clear()
    trace(29, {"alpha": 0.6, "beam": 5})                              # a hit, whatever the key order
    trace(0, {"beam": 5, "alpha": 0.6})                               # long gone: computed again
    assert calls == [0]


def test_a_result_larger_than_the_bound_is_returned_but_not_kept():
    @bounded_cache(max_bytes=MIB)
    def big(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.uint8)

    assert big(4 * MIB).shape == (4 * MIB,)
    assert big.cache.currsize == 0 and len(big.cache) == 0
    big(1000)
    assert big.cache.currsize == len(pickle.dumps(np.zeros(1000, dtype=np.uint8), protocol=pickle.HIGHEST_PROTOCOL))


def test_each_call_gets_its_own_copy_and_errors_are_not_cached():
    failures = []

    @bounded_cache(max_bytes=MIB)
    def result(n: int) -> dict:
        if n < 0:
            failures.append(n)
            raise ValueError("negative")
        return {"weights": np.arange(n, dtype=np.float32)}

    first = result(4)
    first["weights"][:] = -1                                          # a page scribbles on its copy
    assert result(4)["weights"].tolist() == [0, 1, 2, 3]
    for _ in range(2):
        with pytest.raises(ValueError):
            result(-1)
    assert failures == [-1, -1]


def test_the_apps_caches_are_bounded_in_bytes():
    from webapp import analyses, models

    computations = (models.translate, models.attention, models.score, models.side_by_side, models.compare_scores,
                    models.compare_test, models.param_change, analyses.align_one)
    bounds = {fn.__name__: fn.cache.maxsize for fn in computations}
    assert bounds == {"translate": models.TRANSLATION_CACHE_BYTES, "attention": models.TRACE_CACHE_BYTES,
                      "score": models.SCORE_CACHE_BYTES, "side_by_side": models.SCORE_CACHE_BYTES,
                      "compare_scores": models.COMPARISON_CACHE_BYTES, "compare_test": models.COMPARISON_CACHE_BYTES,
                      "param_change": models.COMPARISON_CACHE_BYTES, "align_one": analyses.ALIGNMENT_CACHE_BYTES}
    every = [fn for module in (models, analyses) for fn in vars(module).values()
             if callable(fn) and hasattr(fn, "cache") and getattr(fn, "__module__", "") == module.__name__]
    assert len(every) >= 18, [fn.__name__ for fn in every]          # the analyses' caches are counted too
    assert sum(fn.cache.maxsize for fn in every) <= 512 * MIB


def test_a_loaded_checkpoint_enters_a_key_by_its_path_and_weights_hash_only():
    """The app's computations take the loaded checkpoint; the cache keys it by LoadedCheckpoint.cache_key,
    so the same weights at the same path share results and other weights (or another path) do not."""
    from types import SimpleNamespace

    from explorer.store.checkpoint import LoadedCheckpoint
    from webapp.result_cache import _key

    def loaded(path: str, sha: str):
        return LoadedCheckpoint(model=object(), tokenizer=object(), config=None, meta={}, card=None,
                                path=Path(path), name="x", sha256=sha)

    assert loaded("a", "1").cache_key == ("a", "1")
    assert _key(loaded("a", "1"), "text") == _key(loaded("a", "1"), "text")       # another model object: same key
    assert _key(loaded("a", "1"), "text") != _key(loaded("a", "2"), "text")
    assert _key(loaded("a", "1"), "text") != _key(loaded("b", "1"), "text")
    assert "object at" not in _key(loaded("a", "1"), SimpleNamespace(cache_key=("c", "3")))


def test_holds_says_whether_a_call_would_be_a_hit_without_computing_or_reordering():
    calls = []

    @bounded_cache(max_bytes=3 * MIB)
    def grid(n: int, settings: dict) -> np.ndarray:
        calls.append(n)
        return np.full(MIB // 8, n, dtype=np.float64)                # ~1 MiB each: two fit

    assert not grid.holds(1, {"a": 1}) and calls == []               # asked, not computed
    grid(1, {"a": 1})
    grid(2, {"a": 1})
    assert grid.holds(1, {"a": 1}) and grid.holds(2, {"a": 1}) and not grid.holds(1, {"a": 2})
    grid(3, {"a": 1})                                                 # 1 was the least recently used, holds() or not
    assert not grid.holds(1, {"a": 1}) and grid.holds(2, {"a": 1})
    grid.clear()
    assert not grid.holds(2, {"a": 1})


def test_one_call_however_its_arguments_are_spelt():
    """By position or by name, a default left out or passed: one key (the Translate page passes int8=False,
    the Beam page leaves it out, and a student's second page must not decode again)."""
    calls = []

    @bounded_cache(1 << 20)
    def translate(ckpt, text, cfg, prefix=(), int8=False):
        calls.append(text)
        return text.upper()

    assert translate("c", "hola", {"beam": 5}) == "HOLA"
    assert translate("c", "hola", {"beam": 5}, int8=False) == "HOLA"
    assert translate("c", text="hola", cfg={"beam": 5}, prefix=()) == "HOLA"
    assert translate.holds("c", "hola", {"beam": 5}, (), False)
    assert calls == ["hola"]
    translate("c", "hola", {"beam": 5}, int8=True)                 # another value: another call
    assert calls == ["hola", "hola"] and len(translate.cache) == 2
