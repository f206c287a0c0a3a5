"""The Search page's parts: the beam-size curve over the checkpoint's held-out pairs (and, with exact
search, the search-error rate per beam size) run as a background job of the app's own process, its
cached result file, and the views of that result (webapp/pages/search.py stays thin).

Jobs (webapp.study_job, as the head lab's and the alignment scorecard's): one per checkpoint weights +
SearchSettings, on its own copy of the checkpoint, running explorer.studies.contrastive.job.BEAM_CURVE
(progress per beam size and penalty, Cancel between batches and inside exact search) and writing the
JSON once, atomically, under runs_root()/search/ (explorer.store.run_paths.analysis_file); a cancelled or
failed job writes nothing.
An existing result file for the same weights and settings is shown at once, never recomputed.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import pandas as pd
import streamlit as st

from explorer.studies.contrastive.curve import BEAMS, Penalty, beam_config
from explorer.studies.contrastive.job import SearchSettings
from explorer.plots import contrastive as plots
from explorer.store import run_paths as rp
from webapp import downloads, tables
from webapp import url_keys as url
from webapp.text_safety import md_escape

PENALTIES = ("none", "gnmt:0.6")
LIST_COLUMNS = [3, 2]                      # the widths of the beam sizes' and the penalties' lists
DEFAULT_SENTENCES = 100
EXACT_SECONDS = (1, 60)                    # the page's bounds on exact search's time per sentence
EXACT_DEFAULT_SENTENCES, EXACT_DEFAULT_SECONDS = 20, 5
COLUMNS = {"length_penalty": "length penalty", "beam": "beam", "bleu": "BLEU", "chrf": "chrF",
           "length_ratio": "length ratio", "mean_score": "mean score", "empty": "empty outputs",
           "higher_score_worse_chrf": "higher score, worse chrF", "search_errors": "search errors (proven)",
           "search_errors_known": "search errors known (all searched)", "seconds": "seconds"}
# The table's formats, and what an empty cell (—) of a column means (tables.shown adds it to its help)
FORMATS = {"beam": "%d", "BLEU": "%.2f", "chrF": "%.2f", "mean score": "%.2f", "length ratio": "%.3f",
           "empty outputs": "%.3f", "higher score, worse chrF": "%.3f", "search errors (proven)": "%.3f",
           "search errors known (all searched)": "%.3f"}
HELPS = {"higher score, worse chrF": "The share of sentences whose output scores higher than the next smaller "
                                     "beam's yet has a lower sentence chrF.",
         "search errors (proven)": "Over the sentences exact search proved: the share whose beam output scores "
                                   "below the model's best output.",
         "search errors known (all searched)": "Over every sentence exact search searched: the share where it "
                                               "found an output scoring above the beam's (a lower bound)."}
EMPTY = {"higher score, worse chrF": "the smallest beam size of its length penalty: nothing to compare with.",
         "search errors (proven)": "no exact search for this row (it ran without a length penalty only, when "
                                   "asked), or exact search proved no sentence within its time.",
         "search errors known (all searched)": "no exact search for this row (it runs without a length penalty "
                                               "only, when asked)."}


def allowed_beams(model) -> tuple[int, ...]:
    """The curve's beam sizes this model can decode with (a beam needs 2k tokens it may write)."""
    from explorer.decoding.core import check_config

    allowed = []
    for beam in BEAMS:
        try:
            check_config(beam_config(beam, Penalty()), model, beam=True)
        except ValueError:
            continue
        allowed.append(beam)
    return tuple(allowed)


def list_control(spec: url.UrlKey, widget: str, label: str, choices: tuple, default: tuple, column) -> list:
    """A multiselect whose picks are in the URL as comma-separated text: a link's unknown parts are dropped,
    an empty or wholly unknown list falls back to `default`; the picks shown are written back."""
    raw = url.linked(spec)
    held = st.session_state.get(widget)
    if raw is not None:
        wanted = {part.strip() for part in str(raw).split(",")}
        url.hold(widget, [c for c in choices if str(c) in wanted] or list(default))
    elif isinstance(held, list):
        url.hold(widget, held)
    else:
        url.hold(widget, [c for c in st.session_state.get("_" + widget, default) if c in choices] or list(default))
    picked = column.multiselect(label, choices, key=widget)
    url.put(**{spec.key: ",".join(map(str, picked)) or None})
    st.session_state["_" + widget] = list(picked)
    return list(picked)


def settings_form(model, n_pairs: int) -> SearchSettings | None:
    """The job's settings from the page's controls (kept in the URL), or None after a message."""
    beams_allowed = allowed_beams(model)
    # A multiselect shows its chips on one line and hides what does not fit: the two lists share a row
    # (LIST_COLUMNS), wide enough for all six beam sizes in presenter mode's larger type at 1024 px; the
    # number of sentences goes beside the exact-search checkbox below them.
    lists, counts = st.columns(LIST_COLUMNS), st.columns([1, 2], vertical_alignment="bottom")
    beams = list_control(url.SEARCH_BEAMS, "search_beams", "Beam sizes", beams_allowed, beams_allowed, lists[0])
    penalties = list_control(url.SEARCH_LP, "search_lp", "Length penalties", PENALTIES, PENALTIES[:1], lists[1])
    url.seed(url.SEARCH_N, "search_n", min(DEFAULT_SENTENCES, n_pairs), high=n_pairs)
    n = counts[0].number_input("Sentences (the first N test pairs)", 1, n_pairs, key="search_n")
    url.write(url.SEARCH_N, "search_n", int(n))
    url.seed(url.SEARCH_EXACT, "search_exact", False, options=(False, True))
    exact = counts[1].checkbox("Exact search too (search errors per beam size: Stahlberg & Byrne 2019)",
                               key="search_exact")
    url.write(url.SEARCH_EXACT, "search_exact", exact)
    exact_n, seconds = 0, EXACT_DEFAULT_SECONDS
    if exact:                                  # both change the result, so both are in the URL
        left, right = st.columns(2)
        url.seed(url.SEARCH_EXACT_N, "search_exact_n", min(EXACT_DEFAULT_SENTENCES, int(n)), high=int(n))
        url.seed(url.SEARCH_EXACT_S, "search_exact_s", EXACT_DEFAULT_SECONDS, low=EXACT_SECONDS[0],
                 high=EXACT_SECONDS[1])
        exact_n = int(left.number_input("Exact search on the first N of them", 1, int(n), key="search_exact_n"))
        seconds = int(right.number_input("Seconds per sentence at most", *EXACT_SECONDS, key="search_exact_s"))
        url.write(url.SEARCH_EXACT_N, "search_exact_n", exact_n)
        url.write(url.SEARCH_EXACT_S, "search_exact_s", seconds)
    else:                                      # not drawn: out of the URL (a link shows what the page shows)
        url.put(**{url.SEARCH_EXACT_N.key: None, url.SEARCH_EXACT_S.key: None})
    if not beams or not penalties:
        st.info("Pick at least one beam size and one length penalty.")
        return None
    try:
        return SearchSettings(beams=tuple(beams), sentences=int(n), penalties=tuple(penalties), exact=exact,
                              exact_sentences=exact_n, exact_seconds=seconds)
    except ValueError as err:
        st.warning(f"These settings cannot be run: {md_escape(err)}")
        return None


def plain_settings(settings: SearchSettings) -> dict:
    return {k: v for k, v in asdict(settings).items() if k != "parsed"}


def result_path(sha: str, settings: SearchSettings) -> Path:
    return rp.analysis_file(rp.SEARCH, sha, plain_settings(settings))


def curve_table(result: dict) -> pd.DataFrame:
    """The curve's rows as the page shows them (no per-sentence translations)."""
    frame = pd.DataFrame([{k: r.get(k) for k in COLUMNS} for r in result["beam_curve"]])
    return frame.rename(columns=COLUMNS)


def show_result(result: dict, name: str) -> None:
    """The curve's figures, its table, the exact search's summary and the downloads."""
    s = result.get("settings", {})               # read back from runs/search/: its strings are shown as text
    st.caption(f"{md_escape(s.get('sentences', '?'))} held-out sentences, outputs cut at "
               f"{md_escape((s.get('decoding') or {}).get('max_len_a', '?'))} x source + "
               f"{md_escape((s.get('decoding') or {}).get('max_len_b', '?'))} tokens; computed in "
               f"{md_escape(result.get('seconds', '?'))} s.")
    rows = result["beam_curve"]
    downloads.chart(plots.curve_figure(rows), downloads.file_stem(name, "beam_curve"), key="search_curve")
    st.caption(curve_caption(rows))
    errors = plots.search_error_figure(rows)
    if errors is not None:
        downloads.chart(errors, downloads.file_stem(name, "search_errors"), key="search_errors")
        if plots.no_search_errors(rows):
            st.caption("No search error found at any beam size: on no sentence did exact search find an output "
                       "the model scores above the beam's (every rate is 0, drawn on the zero line).")
    table = curve_table(result)
    shown, config = tables.shown(table, FORMATS, HELPS, EMPTY)
    st.dataframe(shown, hide_index=True, key="search_table", column_config=config)
    summary = result.get("exact_summary") or {}
    if summary:
        st.markdown(summary_text(summary))
    downloads.table_csv_button(table, downloads.file_stem(name, "beam_curve"), key="search_csv",
                               label="The curve as CSV")
    downloads.bundle_button(lambda: result, downloads.file_stem(name, "search"), key="search_json",
                            label="The whole result, translations and exact search included (JSON)")


def curve_caption(rows: Sequence[dict]) -> str:
    """What the curve's numbers mean, and whether this run shows the beam-search curse: said from the
    rows, so the text never claims a fall that the figure above it does not show."""
    plain = sorted((r for r in rows if r.get("length_penalty") == "none"), key=lambda r: r["beam"])
    if not plain:
        curse = ("The beam-search curse (Koehn & Knowles 2017) shows without a length penalty: add \"none\" to "
                 "the length penalties to see it.")
    elif len(plain) < 2:
        curse = ("With one beam size per length penalty there is no curve to read; pick two or more to see "
                 "whether a wider beam helps.")
    else:
        first, last = plain[0], plain[-1]
        shorter = last["length_ratio"] < first["length_ratio"]
        higher = last["mean_score"] > first["mean_score"]
        worse = last["bleu"] < first["bleu"]
        changes = (f"beam {last['beam']} against beam {first['beam']}: mean score {first['mean_score']:.2f} -> "
                   f"{last['mean_score']:.2f}, length ratio {first['length_ratio']:.2f} -> "
                   f"{last['length_ratio']:.2f}, BLEU {first['bleu']:.1f} -> {last['bleu']:.1f}")
        if worse and (shorter or higher):
            curse = (f"Here, without a length penalty, {changes}. Higher scores or shorter outputs with lower BLEU "
                     "are the beam-search curse (Koehn & Knowles 2017).")
        elif shorter or higher:
            found = " and ".join(w for w, hit in (("higher scores", higher), ("shorter outputs", shorter)) if hit)
            curse = (f"Here, without a length penalty, {changes}: the wider beam found {found}, but BLEU did not "
                     "fall, so this run shows no beam-search curse (Koehn & Knowles 2017).")
        else:
            curse = (f"Here a wider beam finds neither higher scores nor shorter outputs (beam {first['beam']} to "
                     f"{last['beam']}, no length penalty), so this run shows no beam-search curse (Koehn & Knowles "
                     "2017).")
    return (curse + " Mean score: the outputs' summed log-probability per sentence (natural log; 0 is "
            "certain), before any length penalty. Length ratio: output words / reference words. "
            "Higher score, worse chrF: the share of sentences whose output scores higher than the next "
            "smaller beam's yet has a lower sentence chrF (empty for the smallest beam: nothing to compare with).")


def summary_text(summary: dict) -> str:
    def share(value) -> str:
        return "—" if value is None else f"{100 * value:.0f}%"
    return (f"**Exact search** was proven on {summary['proven']} of {summary['searched']} sentences within its "
            f"budget. Of the proven, the model's best output is empty in {share(summary.get('empty_proven'))} and "
            f"shorter than half the widest beam's output in {share(summary.get('short_proven'))}.")
