"""The pages' analyses on the shared model (webapp.models): the Alignment page's one sentence, the Layers
and Causes pages' lenses and patching, the Contributions page's ALTI+ and its calibration, the Beam page's
contrast and the reference's fall, and how faithful each of their attributions is on its sentence
(explorer.studies.contributions.faithfulness.attribution_faithfulness). Each is memoised for every session in a cache bounded in bytes, keyed by
the loaded checkpoint's cache_key and waits for its place in the model's queue (models.model_slot), as
webapp.models' own computations do; this module holds the analyses so that one holds the model. The
Features and Graphs pages' own (their dictionaries, features, steers, graphs) are in webapp.feature_analyses.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import streamlit as st

from explorer.config import DecodeConfig
from webapp.models import model_slot, translate
from webapp.result_cache import bounded_cache

# Bounded in bytes as webapp.models' caches are (all of them together: tests/unit/test_result_cache.py).
ALIGNMENT_CACHE_BYTES = 8 << 20       # the Alignment page's one sentence under every aligner (~0.1-1 MB each)
LENS_CACHE_BYTES = 4 << 20            # the Layers page: a translation per encoder layer, the logit lens (~5-200 KB)
PATCHING_CACHE_BYTES = 4 << 20        # the Causes page: pairs, swaps, grids (~5-50 KB), patched translations
CONTRIBUTIONS_CACHE_BYTES = 8 << 20   # the Contributions page: one pair's ALTI+ (~0.1-2 MB), calibrations (~1 KB)
CONTRAST_CACHE_BYTES = 2 << 20        # the Beam page: one step's contrast (~2-20 KB), a reference's fall (~2 KB)
FAITHFULNESS_CACHE_BYTES = 1 << 20    # an attribution's faithfulness on one sentence (~1 KB each, three pages)


@bounded_cache(ALIGNMENT_CACHE_BYTES)
def align_one(ckpt, pair, methods: tuple, ig_steps: int):
    """One gold pair under every aligner (explorer.studies.align.sentence); its attributions run in batches
    bounded in bytes (explorer.studies.align.attribution.ATTRIBUTION_BYTES)."""
    from explorer.studies.align.sentence import align_sentence
    with model_slot():
        return align_sentence(ckpt.model, ckpt.tokenizer, pair, list(methods), ig_steps)


@bounded_cache(FAITHFULNESS_CACHE_BYTES)
def why_faithfulness(ckpt, pair, methods: tuple, ig_steps: int, word: int) -> dict:
    """How faithful each method's "why this word" scores (align_one's row of target word `word`, over the
    source words) are: the source words it ranks highest removed or kept whole (their pieces together),
    log p of the word's pieces measured (explorer.studies.contributions.faithfulness.attribution_faithfulness)."""
    from explorer.studies.align.pairs import model_pair
    from explorer.studies.contributions.faithfulness import attribution_faithfulness

    found = align_one(ckpt, pair, methods, ig_steps)
    mp = model_pair(ckpt.model, ckpt.tokenizer, pair)
    scores = {label: m[word] for label, m in found.matrices.items() if m.shape[0] > word}
    with model_slot():
        return attribution_faithfulness(ckpt.model, mp.src_ids, mp.out_ids, scores,
                                        positions=mp.tgt_groups[word], groups=mp.src_groups)


# ---- the Layers and Causes pages (explorer.studies.lens, explorer.studies.patching) --------------------------------
@bounded_cache(LENS_CACHE_BYTES)
def lens_translations(ckpt, text: str, beam: int = 1):
    """The DecoderLens: one translation per encoder depth, embeddings first; greedy, or beam `beam`."""
    from dataclasses import replace

    from explorer.studies.lens.decoder_lens import LENS_DECODING, lens_translations as run

    cfg = LENS_DECODING if beam <= 1 else replace(LENS_DECODING, strategy="beam", beam_size=beam, n_best=1)
    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, text, cfg)


@bounded_cache(LENS_CACHE_BYTES)
def logit_lens(ckpt, src_ids: tuple, out_ids: tuple, top_k: int = 5):
    """The logit lens over one pair, forced on `out_ids` (EOS included)."""
    from explorer.studies.lens.logit_lens import logit_lens as run

    with model_slot():
        return run(ckpt.model, ckpt.tokenizer, list(src_ids), list(out_ids), top_k)


@bounded_cache(PATCHING_CACHE_BYTES)
def swap_suggestions(ckpt, text: str, n: int = 5) -> list:
    """One-word swaps of `text` that change its translation (explorer.studies.patching.swap)."""
    from explorer.studies.patching.swap import suggest_swaps

    with model_slot():
        return suggest_swaps(ckpt.model, ckpt.tokenizer, text, n)


@bounded_cache(PATCHING_CACHE_BYTES)
def minimal_pair(ckpt, clean: str, corrupt: str):
    """(the MinimalPair, its description: explorer.studies.patching.job.describe without the logit differences),
    or the library's reason the two texts make no pair, as a str (kept too: a refusal costs two decodes)."""
    from explorer.decoding.translate import pieces
    from explorer.studies.patching.pair import make_pair

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
    from explorer.studies.patching.grids import pair_grids
    from explorer.studies.patching.pair import make_pair

    with model_slot():
        return pair_grids(ckpt.model, make_pair(ckpt.model, ckpt.tokenizer, clean, corrupt))


@bounded_cache(PATCHING_CACHE_BYTES)
def patched_translation(ckpt, clean: str, corrupt: str, point: str, index: tuple,
                        direction: str) -> tuple[list[str], str]:
    """(pieces, text) of one patched run's own greedy translation (PairRuns.translation). The pair is
    minimal_pair's (cached) and the two runs' activations are kept for the pair's next picks, so a cell
    pick costs one patched decode (benchmarks/layers.py: "cell pick")."""
    from explorer.decoding.translate import pieces
    from explorer.studies.patching.runs import Cell

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
    from explorer.studies.patching.runs import PairRuns

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


# ---- the Contributions page (explorer.studies.contributions) -------------------------------------------------
@bounded_cache(CONTRIBUTIONS_CACHE_BYTES)
def contributions(ckpt, src_ids: tuple, out_ids: tuple):
    """ALTI+ of one teacher-forced pair (explorer.studies.contributions.sentence): every layer's matrices, the
    rollout, each output token's source share."""
    from explorer.studies.contributions.sentence import sentence_contributions

    with model_slot():
        return sentence_contributions(ckpt.model, list(src_ids), list(out_ids))


CONTRIBUTION_MAPS = ("rollout", "cross block", "cross-attention")     # the page's three maps of a layer


@bounded_cache(FAITHFULNESS_CACHE_BYTES)
def contribution_faithfulness(ckpt, src_ids: tuple, out_ids: tuple, layer: int) -> dict:
    """How faithful the Contributions page's three source maps after decoder layer `layer` (1-based) are
    on this pair: the ALTI+ rollout's source part, the layer's ALTI+ cross block and its raw
    cross-attention, each over every output token (explorer.studies.contributions.faithfulness.attribution_faithfulness;
    a few seconds on the shipped Bible model, so the page asks first)."""
    from explorer.studies.contributions.faithfulness import attribution_faithfulness

    sc = contributions(ckpt, src_ids, out_ids)
    at = int(layer) - 1
    maps = dict(zip(CONTRIBUTION_MAPS, (sc.rollout[at][:, :sc.n_src], sc.cross_source[at], sc.cross_attention[at])))
    with model_slot():
        return attribution_faithfulness(ckpt.model, list(src_ids), list(out_ids), maps)


@bounded_cache(CONTRIBUTIONS_CACHE_BYTES)
def source_share_calibration(ckpt, n: int) -> dict:
    """The source share over the first n held-out pairs with a reference, forced on it (explorer.studies.contributions.job's
    summary: percentiles, means, tokens) and "sentences": a checkpoint's own yardstick for "this word owes little
    to the source", computed once per weights. Only the checkpoint's own test.tsv is read (shipped checkpoints
    carry one): building a training corpus's test split on a page's opening could take minutes. ValueError
    (DataError) when there is none, or none of its pairs has a reference."""
    from explorer.studies.contributions.job import ContributionSettings, run_contributions
    from explorer.data.files import read_tsv
    from explorer.data.types import DataError
    from explorer.evaluation.scores import own_test_split
    from explorer.files.names import TEST_SPLIT

    held_out = own_test_split(ckpt.path)
    if held_out is None:
        raise DataError(f"the checkpoint carries no {TEST_SPLIT} of held-out pairs")
    pairs = [p for p in read_tsv(str(held_out), max_bytes=50 << 20) if p.tgt.strip()][:n]
    if not pairs:
        raise DataError(f"no pair of its {TEST_SPLIT} has a reference")
    with model_slot():
        result = run_contributions(ckpt.model, ckpt.tokenizer, pairs, ContributionSettings(sentences=len(pairs)))
    return {**result["summary"], "sentences": result["settings"]["sentences"]}


# ---- the Beam search page's contrast and the reference's fall (explorer.studies.contrastive) ----------------
@bounded_cache(CONTRAST_CACHE_BYTES)
def contrast(ckpt, src_ids: tuple, prefix: tuple, chosen: int, foil: int, steps: int) -> dict:
    """Why `chosen` and not `foil` after `prefix`: {method: StepContrast} by gradient x input and by
    integrated gradients at `steps` points, each beside the plain attribution of `chosen`."""
    from explorer.studies.contrastive.attribution import contrast_all

    with model_slot():
        return contrast_all(ckpt.model, list(src_ids), list(prefix), int(chosen), int(foil), int(steps))


@bounded_cache(CONTRAST_CACHE_BYTES)
def reference_fall(ckpt, text: str, cfg: dict, reference: str):
    """Where `reference` left the beam search of `text` under `cfg` (the page's own search, from translate's
    cache) and the verdict: search error or model error. ValueError when the reference has no pieces."""
    from explorer.studies.contrastive.fall import reference_fall as follow
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


@bounded_cache(FAITHFULNESS_CACHE_BYTES)
def contrast_faithfulness(ckpt, src_ids: tuple, prefix: tuple, chosen: int, foil: int, steps: int,
                          method: str) -> dict:
    """How faithful `method`'s two attributions of contrast(...) are over the source: {"contrast": the
    contrastive one, measured on log p(chosen) - log p(foil); "plain": the chosen token's, measured on
    log p(chosen)}, each beside its random baseline (explorer.studies.contributions.faithfulness.attribution_faithfulness
    at the step's one position)."""
    from explorer.studies.contributions.faithfulness import attribution_faithfulness

    picked = contrast(ckpt, src_ids, prefix, chosen, foil, steps)[method]
    out, at = [*prefix, int(chosen)], [len(prefix)]
    found = {}
    with model_slot():
        found["contrast"] = attribution_faithfulness(ckpt.model, list(src_ids), out, {"contrast": picked.contrast.source},
                                                     positions=at, foil=int(foil))
        if picked.plain is not None:
            found["plain"] = attribution_faithfulness(ckpt.model, list(src_ids), out, {"plain": picked.plain.source},
                                                      positions=at)
    return found


# ---- the training pairs a page shows (the Features page's contexts, grounding's verses) -----------------
@st.cache_resource(max_entries=3, show_spinner="Reading the training pairs (once)…")
def training_split(dataset: str) -> list:
    """A dataset's training split, read once per dataset and shared (the Bible's: 28,627 pairs, ~38 MB);
    DataError or PairsUnusable when it cannot be read here."""
    from explorer.studies.common.training_data import dataset_pairs
    return dataset_pairs(dataset)
