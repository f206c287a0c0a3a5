"""The Alignment page's parts (webapp/pages/alignment.py stays thin): which gold set, one sentence
under every aligner, and the scorecard as a background job (webapp.study_job) whose JSON lives
under runs/align/ (explorer.store.run_files.analysis_file; the only place the app writes it).

Gold sets: the checkpoint's own (explorer.studies.align.gold_sets) or a file the user uploads (parsed by
explorer.studies.align.gold as untrusted input, at most UPLOAD_BYTES); the scorecard's cache key holds the
gold set's content hash, so a different file never reuses another file's result.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from explorer.studies.align.gold import GoldError, GoldPair, format_gold, parse_gold
from explorer.studies.align.metrics import score_links
from explorer.data.types import DataError
from explorer.studies.align.scorecard import AlignSettings
from explorer.studies.align.sentence import KIND_NAMES, VARIANT_NAMES
from explorer.plots import alignment as plots
from explorer.store import run_paths as rp
from webapp import downloads, models, state, study_job, tables
from webapp.numbering import count
from webapp.text_safety import md_escape
from webapp.views import contributions

UPLOAD_BYTES = 2 * 1024 * 1024


def held_out_or_none(ckpt_path: str, sha: str) -> list:
    """The checkpoint's held-out pairs, or [] when it has none (an uploaded gold set still scores it)."""
    try:
        return study_job.held_out_pairs(ckpt_path, sha)
    except DataError:
        return []


@st.cache_data(max_entries=8, show_spinner=False)
def shipped_gold(ckpt_path: str, sha: str) -> tuple[list[GoldPair], str, int | None] | str:
    """(pairs, name, how many are held out) of the checkpoint's own gold set, or why there is none."""
    from explorer.studies.align.gold_sets import default_gold, held_out_share
    held = held_out_or_none(ckpt_path, sha)
    try:
        pairs, name = default_gold(models.load(ckpt_path).meta, held)
    except GoldError as err:
        return str(err)
    return pairs, name, held_out_share(pairs, held) if held else None


def uploaded_gold(data: bytes, name: str) -> tuple[list[GoldPair], str] | str:
    """An uploaded gold file's pairs and its name, or the message saying why it cannot be used. The name
    the browser sent is shown only as rp.clean_upload_name leaves it (no folders, no bidirectional
    overrides, cut), in messages and labels alike."""
    name = rp.clean_upload_name(name)
    if len(data) > UPLOAD_BYTES:
        return f"{name}: {len(data):,} bytes, more than the {UPLOAD_BYTES:,} an uploaded gold file may have"
    try:
        return parse_gold(data.decode("utf-8"), name), name
    except UnicodeDecodeError:
        return f"{name}: not UTF-8 text"
    except GoldError as err:
        return str(err)


def gold_digest(pairs: list[GoldPair]) -> str:
    return hashlib.sha256(format_gold(pairs).encode()).hexdigest()[:16]


def result_path(sha: str, settings: AlignSettings, digest: str) -> Path:
    return rp.analysis_file(rp.ALIGN, sha, {**asdict(settings), "gold": digest})


# ---- one sentence: webapp.analyses.align_one (the shared model, queued, byte-bounded cache) -------------
def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def show_sentence(found, chosen: str, why_key: str, name: str,
                  faithful_to: Callable[[int], dict] | None = None) -> None:
    """The chosen aligner's links over gold, and "why this word" with, from `faithful_to(target word)`
    (webapp.analyses.why_faithfulness), how faithful each method's scores are for that word; `name` (the
    checkpoint's) starts every downloaded file's name."""
    pair = found.gold
    downloads.chart(plots.links_figure(pair.src, pair.tgt, set(pair.sure), set(pair.possible),
                                       found.links.get(chosen, set()), found.matrices.get(chosen),
                                       title=chosen),
                    downloads.file_stem(name, "alignment_links"), key="align_links")
    s = score_links([pair], [found.links[chosen]])
    st.caption(f"This sentence: precision {100 * s.precision:.1f}%, recall {100 * s.recall:.1f}%, "
               f"AER {100 * s.aer:.1f}%. Dots: each target word's highest-scoring source word (green where gold "
               "has the link, red where it does not); squares: gold (black: sure, grey: possible).")
    downloads.bundle_button(lambda: sentence_bundle(found, chosen), downloads.file_stem(name, "alignment_sentence"),
                            key="align_sentence_json",
                            label="This sentence: gold, every aligner's links and scores (JSON)")
    t = st.selectbox("Why this word? A target word", range(len(pair.tgt)), key=why_key,
                     format_func=lambda j: f"{j + 1}: {pair.tgt[j]}")
    rows = {label: m[t] for label, m in found.matrices.items() if m.shape[0] > t}
    downloads.chart(plots.why_figure(pair.src, rows, pair.tgt[t]), downloads.file_stem(name, "alignment_why", t + 1),
                    key="align_why_fig")
    downloads.table_csv_button(why_table(pair.src, rows), downloads.file_stem(name, "alignment_why", t + 1),
                               key="align_why_csv", label="These scores as CSV")
    if faithful_to is not None:
        why_faithfulness(faithful_to, t, pair.tgt[t], downloads.file_stem(name, "alignment_why_faithfulness", t + 1))


def why_faithfulness(faithful_to: Callable[[int], dict], t: int, word: str, stem: str) -> None:
    """How faithful each method's "why this word" scores are for target word t (plain data from the library)."""
    with st.spinner("Scoring the word on edited sources…"):
        found = state.friendly(faithful_to, t, what="The faithfulness of these scores")
    if found is None:
        return
    st.markdown(f"**How faithful are these scores for “{md_escape(word)}”?**")
    contributions.faithfulness_table(
        [(label, mine, found["random"]) for label, mine in found["rankings"].items()],
        contributions.faithfulness_caption(found, "source words", f"log p of “{md_escape(word)}”",
                                           f" and the word's {count(len(found['positions']), 'piece')} (a word's "
                                           "pieces go together; gradients rank by their sign: support)"),
        stem, "align_why_faith")


def sentence_bundle(found, chosen: str) -> dict:
    """One sentence under every aligner, as plain data: positions 0-based, as in a gold file (i-j)."""
    pair = found.gold
    return downloads.jsonable({
        "format": "transformer-explorer/alignment-sentence-v1", "chosen": chosen,
        "source": pair.src, "target": pair.tgt, "gold": {"sure": sorted(pair.sure), "possible": sorted(pair.possible)},
        "links": {label: sorted(links) for label, links in found.links.items()},
        "scores": {label: np.asarray(m) for label, m in found.matrices.items()},
        "layout": "links: [source index, target index], 0-based; scores: [target word][source word]"})


def why_table(src: list[str], rows: dict) -> pd.DataFrame:
    """The "why this word" scores: a row per source word (numbered from 1), a column per method."""
    return pd.DataFrame({"source word": [f"{i}: {w}" for i, w in enumerate(src, 1)],
                         **{label: np.asarray(v, dtype=float) for label, v in rows.items()}})


# ---- the scorecard ------------------------------------------------------------------------------
def scorecard_table(result: dict) -> pd.DataFrame:
    """One row per aligner. Layer and head are 1-based numbers, missing (pd.NA in a nullable Int64 column)
    where a row has none (a layer mean, all heads, attributions, eflomal): a column of numbers and "" is
    one Arrow cannot type, and Streamlit logged a traceback each time it retyped it."""
    rows = []
    for r in result["rows"]:
        name = r["aligner"].replace("(naive)", f"({VARIANT_NAMES['naive']})").replace("(shift)", f"({VARIANT_NAMES['shift']})")
        rows.append({"aligner": KIND_NAMES.get(name, name), "layer": r.get("layer"), "head": r.get("head"),
                     "pairs": r.get("pairs"), "precision %": 100 * r["precision"], "recall %": 100 * r["recall"],
                     "AER %": 100 * r["aer"],
                     "AER % (mutual argmax)": None if r.get("aer_mutual") is None else 100 * r["aer_mutual"]})
    table = pd.DataFrame(rows, columns=["aligner", "layer", "head", "pairs", "precision %", "recall %", "AER %",
                                        "AER % (mutual argmax)"])
    return table.astype({"layer": "Int64", "head": "Int64", "AER % (mutual argmax)": "float64"})


def scorecard_caption(result: dict) -> str:
    """What the scorecard was scored on, and what its empty cells (—) mean."""
    g = result["gold"]
    held = "" if g.get("held_out") is None else \
        f"; {g['held_out']:,} pairs of the whole gold set are among this model's held-out test pairs"
    # the result file is read back from runs/align/: its strings are shown as text
    return (f"Scored on {count(g['pairs'], 'gold pair')} from {md_escape(g['name'])} ({g['sure']:,} sure and "
            f"{g['possible']:,} possible-only links){held}; computed in {md_escape(result.get('seconds', '?'))} s. "
            "Best head and best layer are "
            "chosen on this gold set itself. AER % (mutual argmax): only links that are also the best target word "
            "of their source word; — for eflomal, which gives links, not a score per word pair. A layer or "
            "head of —: the row pools them (a layer's mean, all heads) or has none (gradients, eflomal).")


# What an empty cell of the scorecard means (tables.shown adds it to the column's help).
SCORECARD_EMPTY = {
    "layer": "the row pools the layers (the mean of all heads) or has none (gradients, eflomal).",
    "head": "the row pools the heads (a layer's mean, all heads) or has none (gradients, eflomal).",
    "AER % (mutual argmax)": "the aligner gives links, not a score per word pair (eflomal), so no mutual argmax.",
}
SCORECARD_FORMATS = {"layer": "%d", "head": "%d", "pairs": "%d", "precision %": "%.1f", "recall %": "%.1f",
                     "AER %": "%.1f", "AER % (mutual argmax)": "%.1f"}


def show_result(result: dict, name: str) -> None:
    """The scorecard and its per-head grid; `name` (the checkpoint's) starts every downloaded file's name,
    with the gold set's (a scorecard is of one model on one gold set)."""
    st.caption(scorecard_caption(result))
    table = scorecard_table(result)
    shown, config = tables.shown(table, SCORECARD_FORMATS, empty=SCORECARD_EMPTY)
    st.dataframe(shown, hide_index=True, key="align_scorecard", height=36 * (len(table) + 1) + 3,
                 column_config=config)
    stem = downloads.file_stem(name, "alignment_scorecard", result.get("gold", {}).get("name"))
    downloads.table_csv_button(table, stem, key="align_scorecard_csv", label="Scorecard as CSV")
    downloads.bundle_button(lambda: result, stem, key="align_scorecard_json",
                            label="The whole scorecard, per-head grids included (JSON)")
    band = md_escape(", ".join(f"{k} {v}" for k, v in result.get("published_de_en", {}).items()))
    eflomal = result.get("eflomal", {})
    if "error" in eflomal:
        st.caption(f"eflomal could not run here ({md_escape(eflomal['error'])}).")
    elif "corpus" in eflomal:
        st.caption(f"eflomal learned from {md_escape(eflomal['corpus'])} ({eflomal['training_pairs']:,} pairs) plus "
                   "the gold pairs.")
    st.caption(f"For scale only (another language pair and corpus), published German–English AER % "
               f"(awesome-align's README): {band}.")
    c1, c2 = st.columns(2)
    method = c1.radio("Heatmap of", ("attention", "value-norm"), horizontal=True, key="align_grid_method",
                      format_func={"attention": "cross-attention", "value-norm": "value-norm attention"}.get)
    variant = c2.radio("Row read", tuple(VARIANT_NAMES), horizontal=True, key="align_grid_variant",
                       format_func=VARIANT_NAMES.get)
    grid = result["grid"].get(method, {}).get(variant)
    if grid and np.size(grid):
        what = "cross-attention" if method == "attention" else "value-norm attention"
        downloads.chart(plots.aer_grid(grid, f"AER per head: {what}, {VARIANT_NAMES[variant]} (lower is better)"),
                        downloads.file_stem(stem, "grid", method, variant), key="align_grid")
        st.caption("The numbers: every grid is in the scorecard's JSON above (\"grid\": method, row read, "
                   "[layer][head], AER 0-1).")
