"""The Features and Graphs pages' computations on the shared model (webapp.models): a checkpoint's learned
dictionaries loaded once per site (explorer.studies.features), a sentence's features, a feature's effects at its
training contexts, a steer, a feature across its run's checkpoints, a graph job's result read back and an
intervention on a graph's nodes (explorer.studies.graphs). As in webapp.analyses, each result is memoised for
every session in a cache bounded in bytes and computed in its turn in the model's queue (models.model_slot);
the dictionaries, like the model, are resources kept in a few copies, not pickled results.
"""
from __future__ import annotations

import streamlit as st

from webapp import analyses
from webapp.models import load, model_slot
from webapp.result_cache import bounded_cache

# Bounded in bytes as webapp.models' caches are (all of them together: tests/unit/test_result_cache.py).
FEATURES_CACHE_BYTES = 2 << 20        # the Features page: a sentence's features (~2 KB), a feature's effects, a steer
GRAPHS_CACHE_BYTES = 32 << 20         # the Graphs page: a graph read back (0.3 MB numbers, 2.6 MB a short verse)
MAX_FEATURE_SITES = 6                 # dictionaries kept loaded (a site's two: ~4 MB in float32, its contexts ~0.3 MB)


# ---- the Features page (explorer.studies.features) -----------------------------------------------------
@st.cache_resource(max_entries=MAX_FEATURE_SITES, show_spinner="Reading the layer's dictionary…")
def _feature_site(path: str, sha: str, weights_sha256: str, site: str, stamp: tuple, _model, n_pairs: int):
    from explorer.studies.features.job import load_site
    return load_site(_model, weights_sha256, site, n_pairs)


def feature_stamp(ckpt, site: str) -> tuple:
    """What a site's dictionary files are now (their sizes and times): a cached copy is used while it holds."""
    from explorer.files.names import FEATURE_CONTEXTS, SAE_WEIGHTS
    from explorer.studies.features.job import dictionary_folder

    sha = str(ckpt.meta.get("weights_sha256") or "")
    found = []
    for kind, name in (("trained", SAE_WEIGHTS), ("random", SAE_WEIGHTS), ("trained", FEATURE_CONTEXTS)):
        try:
            stat = (dictionary_folder(sha, site, kind) / name).stat()
            found.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            found.append(None)
    return tuple(found)


def feature_site(ckpt, site: str, n_pairs: int):
    """(dictionary, random baseline, training contexts) of one FFN site of the loaded checkpoint;
    explorer.studies.features.files.DictionaryUnusable (one line) when missing, damaged or stale."""
    return _feature_site(str(ckpt.path), ckpt.sha256, str(ckpt.meta.get("weights_sha256") or ""), site,
                         feature_stamp(ckpt, site), ckpt.model, n_pairs)


@bounded_cache(FEATURES_CACHE_BYTES)
def sentence_features(ckpt, site: str, stamp: tuple, n_pairs: int, src_ids: tuple, out_ids: tuple):
    """The strongest features at each position of one sentence and its output (EOS included)."""
    from explorer.studies.features.reading import sentence_features as run

    tc = feature_site(ckpt, site, n_pairs)[0]
    with model_slot():
        return run(ckpt.model, tc, site, list(src_ids), list(out_ids))


@bounded_cache(FEATURES_CACHE_BYTES)
def feature_effects(ckpt, site: str, stamp: tuple, dataset: str, n_pairs: int, feature: int):
    """One feature removed at each of its top training contexts (explorer.studies.features.reading)."""
    from explorer.studies.features.reading import context_effects

    tc, _, index = feature_site(ckpt, site, n_pairs)
    with model_slot():
        return context_effects(ckpt.model, ckpt.tokenizer, tc, site, feature, analyses.training_split(dataset),
                               index.contexts(feature))


@bounded_cache(FEATURES_CACHE_BYTES)
def steer(ckpt, site: str, stamp: tuple, n_pairs: int, feature: int, value: float, src_ids: tuple, out_ids: tuple,
          positions: tuple | None):
    """The sentence translated again with one feature clamped (explorer.studies.features.steering)."""
    from explorer.decoding.translate import forced_target
    from explorer.studies.features.steering import steer as run

    tc = feature_site(ckpt, site, n_pairs)[0]
    with model_slot():
        return run(ckpt.model, tc, site, feature, value, list(src_ids), list(out_ids),
                   None if positions is None else list(positions), given=forced_target(ckpt.tokenizer))


@bounded_cache(FEATURES_CACHE_BYTES)
def feature_over_training(ckpt, site: str, stamp: tuple, dataset: str, n_pairs: int, feature: int, run: tuple):
    """The feature's activation at its top training contexts in each checkpoint of its run (`run`: the
    checkpoints' paths, in training order), read by this checkpoint's dictionary
    (explorer.studies.features.over_training)."""
    from explorer.studies.features.over_training import activation_over_training

    tc, _, index = feature_site(ckpt, site, n_pairs)
    loaded = [load(path) for path in run]
    with model_slot():
        return activation_over_training(ckpt.tokenizer, tc, site, feature, analyses.training_split(dataset),
                                        index.contexts(feature), [(c.name, c.model, c.tokenizer) for c in loaded])


# ---- the Graphs page (explorer.studies.graphs) -----------------------------------------------------------
@st.cache_resource(max_entries=2 * MAX_FEATURE_SITES, show_spinner="Reading the layers' dictionaries…")
def _graph_dictionary(path: str, sha: str, weights_sha256: str, site: str, stamp: tuple | None, _model):
    from explorer.studies.features.files import load
    from explorer.studies.features.job import dictionary_folder
    return load(dictionary_folder(weights_sha256, site, "trained"), site=site, weights_sha256=weights_sha256,
                d_model=_model.cfg.d_model)


def graph_dictionary(ckpt, site: str):
    """One FFN site's trained dictionary alone, as a graph needs it (not its training contexts, which the
    Features page reads: dictionaries the command trained before it kept them serve graphs too);
    explorer.studies.features.files.DictionaryUnusable (one line) when missing, damaged or stale."""
    return _graph_dictionary(str(ckpt.path), ckpt.sha256, str(ckpt.meta.get("weights_sha256") or ""), site,
                             feature_stamp(ckpt, site)[0], ckpt.model)


@bounded_cache(GRAPHS_CACHE_BYTES)
def graph_result(path: str, mtime_ns: int) -> dict | None:
    """A graph job's result file read back (keys checked), or None; `mtime_ns` keys a file written anew."""
    from explorer.studies.graphs.job import GRAPH_THRESHOLDS
    return GRAPH_THRESHOLDS.read(path) if mtime_ns else None


@bounded_cache(GRAPHS_CACHE_BYTES)
def graph_intervention(ckpt, dictionaries: str, text: str, target: str, position: int, foil: str | None,
                       changes: tuple):
    """Feature nodes of one graph's question set to values (`changes`: (site, position, feature, value) each), the
    model run again beside the graph's prediction (explorer.studies.graphs.intervene); `dictionaries` keys the
    dictionaries' files as they are now."""
    from explorer.studies.features.sites import sites
    from explorer.studies.graphs.intervene import NodeChange, intervene
    from explorer.studies.graphs.step import question

    transcoders = {site: graph_dictionary(ckpt, site) for site in sites(ckpt.model)}
    with model_slot():
        asked = question(ckpt.model, ckpt.tokenizer, text, position, target, foil)
        return intervene(ckpt.model, transcoders, asked.step, [NodeChange(*c) for c in changes])
