"""The app's shared model, in one place: loading a checkpoint (once per path + weights fingerprint, on the
app's device, with the app's thread count) and every computation the pages run on it: translate, trace,
score, side by side (and the Alignment page's one sentence, webapp.views.alignment, through model_slot).

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

from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

import os
import threading
from pathlib import Path

import streamlit as st

from explorer.config import DecodeConfig
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import resolve_device
from explorer.store.checkpoint import WEIGHTS, CheckpointError, load_checkpoint
from webapp.result_cache import bounded_cache
from webapp.text_safety import md_escape

DEVICE_ENV = "EXPLORER_DEVICE"           # the device the app's models run on (default: auto)
MAX_MODELS = 4                        # models loaded at once (each ~its float32 weights + a decoder copy)

# Shared result caches, bounded in bytes (a maximal 2,000-character attention trace is ~43 MB, a
# typical sentence's ~1-4 MB). Small on purpose: a lesson's memory is these bounds plus the model, and
# a result that fell out is cheap to make again (a typical trace ~15 ms, a beam-5 translation ~0.1 s);
# what a cache must hold is a class's current sentences while the students click through their pages.
TRACE_CACHE_BYTES = 24 << 20          # ~8-25 typical sentences' traces
TRANSLATION_CACHE_BYTES = 16 << 20    # ~60 translations with their beam traces
SCORE_CACHE_BYTES = 8 << 20           # each of the two scoring caches
COMPARISON_CACHE_BYTES = 4 << 20      # each of the Checkpoints page's three (scores, test sample, weight change)
ALIGNMENT_CACHE_BYTES = 8 << 20       # the Alignment page's one sentence under every aligner (~0.1-1 MB each)
LENS_CACHE_BYTES = 4 << 20            # the Layers page: a translation per encoder layer, the logit lens (~5-200 KB)
PATCHING_CACHE_BYTES = 4 << 20        # the Causes page: pairs, swaps, grids (~5-50 KB), patched translations
CONTRIBUTIONS_CACHE_BYTES = 8 << 20   # the Contributions page: one pair's ALTI+ (~0.1-2 MB), calibrations (~1 KB)
CONTRAST_CACHE_BYTES = 2 << 20        # the Beam page: one step's contrast (~2-20 KB), a reference's fall (~2 KB)


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


def load(path: str | Path):
    """The shared, read-only model of a checkpoint; raises CheckpointError with a clear message."""
    return _load(str(path), _fingerprint(Path(path)))


def current_checkpoint():
    """The LoadedCheckpoint the sidebar picked, or None (the page then shows why and stops)."""
    path = st.session_state.get("checkpoint_path")
    if not path:
        return None
    try:
        return load(path)
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
            notice.info(f"The model is busy with other users' requests: {ahead + 1} ahead of you. "
                        "Yours starts as soon as a place is free…", icon=":material/hourglass_top:")
    try:
        with QUEUE.slot(on_wait):
            yield
    finally:
        notice.empty()


@bounded_cache(TRANSLATION_CACHE_BYTES)
def translate(ckpt, text: str, cfg: dict, prefix: tuple = (), ablate: tuple = (),
              trace: bool = True):
    from explorer.decoding import translate as run

    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, DecodeConfig(**cfg), prefix=list(prefix) or None,
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


@bounded_cache(ALIGNMENT_CACHE_BYTES)
def align_one(ckpt, pair, methods: tuple, ig_steps: int):
    """One gold pair under every aligner (explorer.align.sentence); its attributions run in batches
    bounded in bytes (explorer.align.attribution.ATTRIBUTION_BYTES)."""
    from explorer.align.sentence import align_sentence
    with model_slot():
        return align_sentence(ckpt.model, ckpt.tokenizer, pair, list(methods), ig_steps)


# ---- the Layers and Causes pages (explorer.lens, explorer.patching) --------------------------------
@bounded_cache(LENS_CACHE_BYTES)
def lens_translations(ckpt, text: str, beam: int = 1):
    """The DecoderLens: one translation per encoder depth, embeddings first; greedy, or beam `beam`."""
    from dataclasses import replace

    from explorer.lens.decoder_lens import LENS_DECODING, lens_translations as run

    cfg = LENS_DECODING if beam <= 1 else replace(LENS_DECODING, strategy="beam", beam_size=beam, n_best=1)
    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, cfg)


@bounded_cache(LENS_CACHE_BYTES)
def logit_lens(ckpt, src_ids: tuple, out_ids: tuple, top_k: int = 5):
    """The logit lens over one pair, forced on `out_ids` (EOS included)."""
    from explorer.lens.logit_lens import logit_lens as run

    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, list(src_ids), list(out_ids), top_k)


@bounded_cache(PATCHING_CACHE_BYTES)
def swap_suggestions(ckpt, text: str, n: int = 5) -> list:
    """One-word swaps of `text` that change its translation (explorer.patching.swap)."""
    from explorer.patching.swap import suggest_swaps

    with model_slot():
        return suggest_swaps(ckpt.model, ckpt.tokenizer, text, n)


@bounded_cache(PATCHING_CACHE_BYTES)
def minimal_pair(ckpt, clean: str, corrupt: str):
    """(the MinimalPair, its description: explorer.patching.job.describe without the logit differences),
    or the library's reason the two texts make no pair, as a str (kept too: a refusal costs two decodes)."""
    from explorer.decoding.translate import pieces
    from explorer.patching.pair import make_pair

    try:
        with model_slot():
            pair = make_pair(ckpt.model, ckpt.tokenizer, clean, corrupt)
    except ValueError as err:
        return str(err)
    tok = ckpt.tokenizer
    return pair, {"src_pieces": pieces(tok, pair.clean_src, "src"), "corrupt_pieces": pieces(tok, pair.corrupt_src, "src"),
                  "prefix_pieces": pieces(tok, pair.prefix, "tgt"),
                  "clean_token": pieces(tok, [pair.clean_token], "tgt")[0],
                  "corrupt_token": pieces(tok, [pair.corrupt_token], "tgt")[0],
                  "clean_output": pieces(tok, pair.clean_output, "tgt"),
                  "corrupt_output": pieces(tok, pair.corrupt_output, "tgt")}


@bounded_cache(PATCHING_CACHE_BYTES)
def patching_grids(ckpt, clean: str, corrupt: str):
    """Every patching grid of the pair, denoising and noising (one pair: seconds; at base size ~25 s)."""
    from explorer.patching.grids import pair_grids
    from explorer.patching.pair import make_pair

    with model_slot():
        return pair_grids(ckpt.model, make_pair(ckpt.model, ckpt.tokenizer, clean, corrupt))


@bounded_cache(PATCHING_CACHE_BYTES)
def patched_translation(ckpt, clean: str, corrupt: str, point: str, index: tuple,
                        direction: str) -> tuple[list[str], str]:
    """(pieces, text) of one patched run's own greedy translation (PairRuns.translation). The pair is
    minimal_pair's (cached) and the two runs' activations are kept for the pair's next picks, so a cell
    pick costs one patched decode (benchmarks/layers.py: "cell pick")."""
    from explorer.decoding.translate import pieces
    from explorer.patching.runs import Cell

    found = minimal_pair(ckpt, clean, corrupt)
    if isinstance(found, str):
        raise ValueError(found)
    with model_slot():
        best = _kept_runs(ckpt, found[0]).translation(Cell(point, tuple(index)), direction).best
    return pieces(ckpt.tokenizer, best.ids, "tgt"), ckpt.tokenizer.decode(best.output_ids, side="tgt")


PAIR_RUNS_KEPT = 4                    # pairs whose clean and corrupted activations stay (~1 MB each at base size)
_pair_runs: "OrderedDict[tuple, object]" = OrderedDict()
_pair_runs_lock = threading.Lock()


def _kept_runs(ckpt, pair):
    """The PairRuns of `pair` on this checkpoint (its two runs, every patchable activation kept), the last
    PAIR_RUNS_KEPT pairs' kept. Only read after they are built: translation() leaves them as they are."""
    from explorer.patching.runs import PairRuns

    key = (ckpt.cache_key, tuple(pair.clean_src), tuple(pair.corrupt_src), tuple(pair.prefix))
    with _pair_runs_lock:
        runs = _pair_runs.get(key)
        if runs is not None:
            _pair_runs.move_to_end(key)
            return runs
    runs = PairRuns(ckpt.model, pair)
    with _pair_runs_lock:
        _pair_runs[key] = runs
        while len(_pair_runs) > PAIR_RUNS_KEPT:
            _pair_runs.popitem(last=False)
    return runs


# ---- the Contributions page (explorer.contributions) -------------------------------------------------
@bounded_cache(CONTRIBUTIONS_CACHE_BYTES)
def contributions(ckpt, src_ids: tuple, out_ids: tuple):
    """ALTI+ of one teacher-forced pair (explorer.contributions.sentence): every layer's matrices, the
    rollout, each output token's source share."""
    from explorer.contributions.sentence import sentence_contributions

    with model_slot():
        return sentence_contributions(ckpt.model, list(src_ids), list(out_ids))


@bounded_cache(CONTRIBUTIONS_CACHE_BYTES)
def source_share_calibration(ckpt, n: int) -> dict:
    """The source share over the first n held-out pairs with a reference, forced on it (explorer.contributions.job's
    summary: percentiles, means, tokens) and "sentences": a checkpoint's own yardstick for "this word owes little
    to the source", computed once per weights. Only the checkpoint's own test.tsv is read (shipped checkpoints
    carry one): building a training corpus's test split on a page's opening could take minutes. ValueError
    (DataError) when there is none, or none of its pairs has a reference."""
    from explorer.contributions.job import ContributionSettings, run_contributions
    from explorer.data.files import read_tsv
    from explorer.data.types import DataError
    from explorer.files.names import TEST_SPLIT

    held_out = Path(ckpt.path) / TEST_SPLIT
    if not held_out.is_file():
        raise DataError(f"the checkpoint carries no {TEST_SPLIT} of held-out pairs")
    pairs = [p for p in read_tsv(str(held_out), max_bytes=50 << 20) if p.tgt.strip()][:n]
    if not pairs:
        raise DataError(f"no pair of its {TEST_SPLIT} has a reference")
    with model_slot():
        result = run_contributions(ckpt.model, ckpt.tokenizer, pairs, ContributionSettings(sentences=len(pairs)))
    return {**result["summary"], "sentences": result["settings"]["sentences"]}


# ---- the Beam search page's contrast and the reference's fall (explorer.contrastive) ----------------
@bounded_cache(CONTRAST_CACHE_BYTES)
def contrast(ckpt, src_ids: tuple, prefix: tuple, chosen: int, foil: int, steps: int) -> dict:
    """Why `chosen` and not `foil` after `prefix`: {method: StepContrast} by gradient x input and by
    integrated gradients at `steps` points, each beside the plain attribution of `chosen`."""
    from explorer.contrastive.attribution import contrast_all

    with model_slot():
        return contrast_all(ckpt.model, list(src_ids), list(prefix), int(chosen), int(foil), int(steps))


@bounded_cache(CONTRAST_CACHE_BYTES)
def reference_fall(ckpt, text: str, cfg: dict, reference: str):
    """Where `reference` left the beam search of `text` under `cfg` (the page's own search, from translate's
    cache) and the verdict: search error or model error. ValueError when the reference has no pieces."""
    from explorer.contrastive.fall import reference_fall as follow
    from explorer.text.encoding import output_ids

    special = ckpt.model.cfg.special
    ids = output_ids(ckpt.tokenizer, reference, ckpt.model.cfg.max_len, special)
    if not reference.strip() or len(ids) <= 1:
        raise ValueError("the reference is empty: type a translation to follow through the search")
    found = translate(ckpt, text, cfg)
    if found.beam_trace is None or found.best is None:
        raise ValueError(found.reason or "no beam search to follow the reference through")
    with model_slot():
        return follow(ckpt.model, found.src_ids, ids, DecodeConfig(**cfg), trace=found.beam_trace, output=found.best)
