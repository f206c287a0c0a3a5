"""The app's shared model, in one place: loading a checkpoint (once per path + weights fingerprint, on the
app's device, with the app's thread count) and every computation the pages run on it: translate, trace,
score, side by side, the Checkpoints page's comparisons (the other pages' analyses: webapp.analyses, through
model_slot).

- The model is loaded once per checkpoint (st.cache_resource) and shared read-only: nobody calls .train()
  on it, and hooks exist only inside explorer.inspection.hooks' per-thread blocks.
- Each computation is memoised for every session in a cache bounded in bytes (webapp.result_cache: a
  result being computed is computed once, other sessions asking wait for it), copied per call and keyed
  by (checkpoint path and weights hash, text, settings), so concurrent users never share a mutable result;
  each takes the loaded checkpoint (models.load), whose `cache_key` is that path and hash; a cache miss
  waits for its place in the model's queue (explorer.runtime.compute_queue), showing the user how many
  requests are ahead.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import os
from pathlib import Path

import streamlit as st

from explorer.config import DecodeConfig
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import resolve_device
from explorer.store.checkpoint import WEIGHTS, CheckpointError, load_checkpoint
from webapp import languages
from webapp.result_cache import bounded_cache
from webapp.text_safety import md_escape

DEVICE_ENV = "EXPLORER_DEVICE"           # the device the app's models run on (default: auto)
INT8_ENV = "EXPLORER_INT8"               # 1: the Translate page starts on int8 weights (a classroom's server)
MAX_MODELS = 4                        # models loaded at once (each ~its float32 weights + a decoder copy)

# Shared result caches, bounded in bytes (a maximal 2,000-character attention trace is ~43 MB, a
# typical sentence's ~1-4 MB). Small on purpose: a lesson's memory is these bounds plus the model, and
# a result that fell out is cheap to make again (a typical trace ~15 ms, a beam-5 translation ~0.1 s);
# what a cache must hold is a class's current sentences while the students click through their pages.
TRACE_CACHE_BYTES = 24 << 20          # ~8-25 typical sentences' traces
TRANSLATION_CACHE_BYTES = 16 << 20    # ~60 translations with their beam traces
SCORE_CACHE_BYTES = 8 << 20           # each of the two scoring caches
COMPARISON_CACHE_BYTES = 4 << 20      # each of the Checkpoints page's three (scores, test sample, weight change)
# (the analyses' bounds, with these under the same total: webapp.analyses)


# ---- loading ---------------------------------------------------------------------------------
def _fingerprint(path: Path) -> str:
    weights = Path(path) / WEIGHTS
    try:
        stat = weights.stat()
        return f"{stat.st_mtime_ns}-{stat.st_size}"
    except OSError:
        return "missing"


def _limit_threads() -> None:
    """One torch thread for the app unless $EXPLORER_THREADS says otherwise.

    Interactive decoding is batch-1 work on small matrices, which gains little from a second
    thread; and when the cores are busy (a background training job), OpenMP threads spin waiting
    for each other: on 2 busy cores a 27-word beam-5 translation measured 0.48 s of CPU with one
    thread and 21 s with two (95 s wall instead of 1.6 s).
    """
    import torch

    wanted = os.environ.get("EXPLORER_THREADS", "1")
    try:
        torch.set_num_threads(max(1, int(wanted)))
    except ValueError:
        torch.set_num_threads(1)


def app_device():
    """Where the app runs its models: $EXPLORER_DEVICE (cpu, cuda, cuda:N), else "auto"."""
    return resolve_device(os.environ.get(DEVICE_ENV, "auto"))


@st.cache_resource(max_entries=MAX_MODELS, show_spinner="Loading the model…")
def _load(path: str, fingerprint: str):
    _limit_threads()
    loaded = load_checkpoint(path, device=app_device())
    loaded.model.eval()
    return loaded


@st.cache_resource(max_entries=MAX_MODELS, show_spinner="Making the int8 copy of the model…")
def _int8(path: str, fingerprint: str):
    from explorer.model.int8 import quantize

    return quantize(_load(path, fingerprint).model)      # a separate object: the shared model is untouched


def int8_model(ckpt):
    """The int8 copy of a loaded checkpoint's model (explorer/model/int8.py), made once and shared like the
    model; Int8Unavailable (a ValueError: state.friendly says it) on a GPU or a torch without int8."""
    return _int8(str(ckpt.path), _fingerprint(Path(ckpt.path)))


def int8_available() -> bool:
    """Whether the app can offer int8 weights: its models run on the CPU and this torch has an int8 engine."""
    from explorer.model.int8 import engine

    return app_device().type == "cpu" and engine() is not None


def int8_default() -> bool:
    """Whether the Translate page starts on int8 weights: $EXPLORER_INT8 (1, true, yes or on), else float32."""
    return os.environ.get(INT8_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def load(path: str | Path):
    """The shared, read-only model of a checkpoint; raises CheckpointError with a clear message."""
    return _load(str(path), _fingerprint(Path(path)))


def current_checkpoint():
    """The LoadedCheckpoint the sidebar picked, or None (the page then shows why and stops)."""
    path = st.session_state.get("checkpoint_path")
    if not path:
        return None
    try:
        return languages.bind(load(path))          # a multilingual model: the sidebar's language pair
    except CheckpointError as err:
        st.error(f"This checkpoint cannot be used: {md_escape(err)}")
    except Exception as err:  # noqa: BLE001 - any damage must end in a message, never a traceback
        st.error(f"This checkpoint cannot be used: {type(err).__name__}: {md_escape(err)}")
    return None


def require_checkpoint():
    ckpt = current_checkpoint()
    if ckpt is None:
        st.info("Pick a working checkpoint in the sidebar.")
        st.stop()
    return ckpt


# ---- computations --------------------------------------------------------------------------------
@contextmanager
def model_slot() -> Iterator[None]:
    """Hold a place in the model's queue (explorer.runtime.compute_queue) while computing; a user who has to wait
    sees how many requests are ahead. A full queue raises QueueFull, a RuntimeError that friendly() and
    the pages turn into a message."""
    notice = st.empty()

    def on_wait(ahead: int) -> None:
        if ahead < 0:
            notice.empty()
        else:
            waiting = ("yours is next" if not ahead else
                       f"{ahead} {'request waits' if ahead == 1 else 'requests wait'} before yours")
            notice.info(f"The model is busy with other users' requests; {waiting}. "
                        "Yours starts as soon as a place is free…", icon=":material/hourglass_top:")
    try:
        with QUEUE.slot(on_wait):
            yield
    finally:
        notice.empty()


@bounded_cache(TRANSLATION_CACHE_BYTES)
def translate(ckpt, text: str, cfg: dict, prefix: tuple = (), ablate: tuple = (),
              trace: bool = True, int8: bool = False):
    """`int8`: on the model's int8 copy (the Translate page's choice; never with heads ablated, which
    needs the float modules); the result is cached apart from the float one."""
    from explorer.decoding import translate as run

    model = int8_model(ckpt) if int8 and not ablate else ckpt.model
    # Top-k past the target vocabulary keeps every piece, as top-k of the whole vocabulary does (the URL and
    # the box allow 1,000; the library refuses more than the vocabulary, which repeated once per sample).
    cfg = dict(cfg, top_k=min(int(cfg.get("top_k") or 0), model.cfg.tgt_vocab_size))
    with model_slot():
        return run(model, ckpt.tokenizer, text, DecodeConfig(**cfg), prefix=list(prefix) or None,
                   ablate=list(ablate), trace=trace and cfg.get("strategy") == "beam")


@bounded_cache(TRACE_CACHE_BYTES)
def attention(ckpt, src_ids: tuple, tgt_ids: tuple, ablate: tuple = ()):
    """One teacher-forced forward inside capture(): every capture point, as numpy."""
    from explorer.decoding import attention_trace

    with model_slot():
        return attention_trace(ckpt.model, ckpt.tokenizer, list(src_ids), list(tgt_ids), ablate=list(ablate))


@bounded_cache(SCORE_CACHE_BYTES)
def score(ckpt, text: str, target: str, cfg: dict, ablate: tuple = ()):
    """Teacher-forced log-probabilities of a given translation (a reference, or an earlier output)."""
    from explorer.decoding import score_text

    with model_slot():
        return score_text(ckpt.model, ckpt.tokenizer, text, target, DecodeConfig(**cfg), ablate=list(ablate))


@bounded_cache(SCORE_CACHE_BYTES)
def side_by_side(ckpt, text: str, reference: str | None, cfg: dict):
    """Teacher-forced decoding of the reference (or of greedy's own output) next to greedy, step by step."""
    from explorer.decoding.side_by_side import side_by_side as run

    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, reference, DecodeConfig(**cfg))


# ---- the Checkpoints and Alignment pages -----------------------------------------------------------
@bounded_cache(COMPARISON_CACHE_BYTES)
def compare_scores(a, b, source: str, output: str):
    """One output teacher-forced under both checkpoints (explorer.evaluation.comparison)."""
    from explorer.evaluation import comparison as cmp
    with model_slot():
        return cmp.score_under_both(a, b, source, output)


@bounded_cache(COMPARISON_CACHE_BYTES)
def compare_test(ckpt, pairs_from, n: int) -> dict:
    """BLEU / chrF / exact of `ckpt` on the first n test pairs of checkpoint `pairs_from`."""
    from explorer.evaluation import comparison as cmp
    pairs, where = cmp.test_pairs(str(pairs_from.path), pairs_from.meta, n)
    with model_slot():
        return {**cmp.test_scores(ckpt.model, ckpt.tokenizer, pairs), "where": where}


@bounded_cache(COMPARISON_CACHE_BYTES)
def param_change(a, b):
    """How far each block's weights moved from checkpoint a to b."""
    from explorer.evaluation import comparison as cmp
    return cmp.param_change(a.model, b.model)
