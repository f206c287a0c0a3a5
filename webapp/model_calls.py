"""The model's computations the pages share: translate, trace, score, side by side.

Each is memoised for every session in a cache bounded in bytes (webapp.result_cache: a result being
computed is computed once, other sessions asking wait for it), and a cache miss waits for its place in
the model's queue (explorer.decoding.compute_queue), showing the user how many requests are ahead. Pages call
them through webapp.state (state.translate, ...).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import streamlit as st

from explorer.config import DecodeConfig
from explorer.decoding.compute_queue import QUEUE
from webapp.result_cache import bounded_cache

# Shared result caches, bounded in bytes (a maximal 2,000-character attention trace is ~43 MB, a
# typical sentence's ~1-4 MB). Small on purpose: a lesson's memory is these bounds plus the model, and
# a result that fell out is cheap to make again (a typical trace ~15 ms, a beam-5 translation ~0.1 s);
# what a cache must hold is a class's current sentences while the students click through their pages.
TRACE_CACHE_BYTES = 24 << 20          # ~8-25 typical sentences' traces
TRANSLATION_CACHE_BYTES = 16 << 20    # ~60 translations with their beam traces
SCORE_CACHE_BYTES = 8 << 20           # each of the two scoring caches


@contextmanager
def model_slot() -> Iterator[None]:
    """Hold a place in the model's queue (explorer.decoding.compute_queue) while computing; a user who has to wait
    sees how many requests are ahead. A full queue raises QueueFull, a RuntimeError that friendly() and
    the pages turn into a message."""
    notice = st.empty()

    def on_wait(ahead: int) -> None:
        if ahead < 0:
            notice.empty()
        else:
            notice.info(f"The model is busy with other users' requests: {ahead + 1} ahead of you. "
                        "Yours starts as soon as a place is free…", icon=":material/hourglass_top:")
    try:
        with QUEUE.slot(on_wait):
            yield
    finally:
        notice.empty()


@bounded_cache(TRANSLATION_CACHE_BYTES)
def translate(ckpt_path: str, sha: str, text: str, cfg: dict, prefix: tuple = (), ablate: tuple = (),
              trace: bool = True):
    from explorer.decoding import translate as run

    from webapp import state

    ckpt = state.load(ckpt_path)
    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, DecodeConfig(**cfg), prefix=list(prefix) or None,
                   ablate=list(ablate), trace=trace and cfg.get("strategy") == "beam")


@bounded_cache(TRACE_CACHE_BYTES)
def attention(ckpt_path: str, sha: str, src_ids: tuple, tgt_ids: tuple, ablate: tuple = ()):
    """One teacher-forced forward inside capture(): every capture point, as numpy."""
    from explorer.decoding import attention_trace

    from webapp import state

    ckpt = state.load(ckpt_path)
    with model_slot():
        return attention_trace(ckpt.model, ckpt.tokenizer, list(src_ids), list(tgt_ids), ablate=list(ablate))


@bounded_cache(SCORE_CACHE_BYTES)
def score(ckpt_path: str, sha: str, text: str, target: str, cfg: dict, ablate: tuple = ()):
    """Teacher-forced log-probabilities of a given translation (a reference, or an earlier output)."""
    from explorer.decoding import score_text

    from webapp import state

    ckpt = state.load(ckpt_path)
    with model_slot():
        return score_text(ckpt.model, ckpt.tokenizer, text, target, DecodeConfig(**cfg), ablate=list(ablate))


@bounded_cache(SCORE_CACHE_BYTES)
def side_by_side(ckpt_path: str, sha: str, text: str, reference: str | None, cfg: dict):
    """Teacher-forced decoding of the reference (or of greedy's own output) next to greedy, step by step."""
    from explorer.decoding.side_by_side import side_by_side as run

    from webapp import state

    ckpt = state.load(ckpt_path)
    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, reference, DecodeConfig(**cfg))
