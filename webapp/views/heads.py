"""The Heads page's parts: the head lab run in a background thread of the app's own process, its
cached result file, and the views of that result (webapp/pages/heads.py stays thin).

Jobs (webapp.study_job, shared with the Alignment and Search pages). One job per checkpoint weights +
LabSettings at a time, on its own copy of the checkpoint, writing the JSON once, atomically, under
runs_root()/heads/ (explorer.store.run_files.head_lab_file) — the only place the app writes it. The job
runs at the torch thread count the app already uses ($EXPLORER_THREADS, default 1:
torch.set_num_threads is process-wide, so the job cannot have its own); interactive pages share the same cores meanwhile (`python -m benchmarks heads-load`: head switches ~1.35x slower).

Cache: an existing result file for the same weights and settings is shown at once, never recomputed.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.studies.heads.job import LabSettings, removal_scoring
from explorer.inspection.trace import KIND_LABELS
from explorer.plots import heads as plots
from explorer.store import run_paths as rp
from webapp import downloads, tables
from webapp import url_keys as url
from webapp.text_safety import md_escape

MAX_SENTENCES = 500
NO_ROLE = "no rule matched"     # a head none of the role rules names (the result file holds null)
MAX_SEEDS = 10
SCORINGS = {"bleu": "BLEU drop: decode each removal (exact)",        # explorer.studies.heads.importance.SINGLE_REMOVALS
            "loss": "loss rise only (approximate, faster)"}
SCORING_NAMES = {"bleu": "the exact scoring (BLEU drop)", "loss": "the approximate scoring (loss rise)"}
SCORING_HELP = ("Exact: the test sentences are translated again without each head, and the head is scored by how "
                "much BLEU falls. Approximate: each head is scored only by how much the teacher-forced loss rises "
                "without it; no removal is translated, so there is no BLEU drop per head, and a head that changes "
                "the loss may leave the greedy translations as they were (or the other way round).")


def result_path(sha: str, settings: LabSettings) -> Path:
    return rp.head_lab_file(sha, settings.key())


def say_unknown_scoring(shown: str) -> None:
    """A link whose lab_single is not a scoring this page offers: say so, and name the scoring `shown`
    instead (the one already picked in this session, else the exact default), which the page then
    writes back into the URL."""
    raw = url.raw(url.LAB_SINGLE)
    if raw is not None and raw not in SCORINGS:
        st.warning(f"The link asks for single-head removal scored by “{md_escape(str(raw)[:40])}”, which is not "
                   f"one of {', '.join(SCORINGS)}: {SCORING_NAMES[shown]} is shown instead.")


# ---- views of a result --------------------------------------------------------------------------
def zoom_query(kind: str, layer: int, head: int, carried: dict[str, str]) -> dict[str, str]:
    """The URL keys the Attention page reads to open one head (kind, layer, head; 1-based) plus the
    shared state (checkpoint, sentence, decoding settings)."""
    return {**carried, url.ATTN_KIND.key: kind, url.LAYER.key: str(layer), url.HEAD.key: str(head)}


def zoom_url(kind: str, layer: int, head: int, carried: dict[str, str]) -> str:
    from urllib.parse import urlencode
    return "attention?" + urlencode(zoom_query(kind, layer, head, carried))


REMOVAL_COLUMNS = {"bleu": ("bleu_drop", "BLEU drop"), "loss": ("loss_rise", "loss rise (approximate)")}


# What each number of the Roles table is (a researcher reads the table without the module docstrings);
# shown as the column headers' tooltips.
ROLE_COLUMN_HELP = {
    "rule": "The documented rule that gave the role, with its threshold (empty: no rule holds).",
    "figure": "The head's mean value of the statistic the rule tests, over the test sentences: compare it "
              "with the rule's threshold.",
    "importance": "Michel et al. 2019: the mean |dL/dξ| over sentences for the head's gate ξ, divided by the "
                  "l2 norm of its layer's heads (the same kind); larger matters more.",
    "BLEU drop": "BLEU points lost on the test sentences when this head alone is removed (full model − without "
                 "it; negative: BLEU rose).",
    "loss rise (approximate)": "Cross-entropy (nats per token) gained when this head alone is removed, "
                               "teacher-forced; no decoding.",
}


def roles_table(result: dict, carried: dict[str, str]) -> pd.DataFrame:
    importance = {(r["kind"], r["layer"], r["head"]): r.get("normalized") for r in result["importance"]}
    field, column = REMOVAL_COLUMNS[removal_scoring(result)]
    drops = {(r["kind"], r["layer"], r["head"]): r.get(field) for r in result["single_head_removal"]}
    rows = []
    for r in result["roles"]:
        key = (r["kind"], r["layer"], r["head"])
        rows.append({"kind": KIND_LABELS.get(r["kind"], r["kind"]), "layer": r["layer"], "head": r["head"],
                     "role": r.get("role") or NO_ROLE, "rule": r.get("rule") or "", "figure": r.get("value"),
                     "importance": importance.get(key), column: drops.get(key),
                     "zoom": zoom_url(r["kind"], r["layer"], r["head"], carried)})
    return pd.DataFrame(rows)


# What an empty cell of the Roles table means, column by column (tables.shown adds it to the help).
ROLE_COLUMN_EMPTY = {
    "figure": "no rule matched this head, so there is no statistic to compare with a threshold.",
    "importance": "the result file has no importance for this head.",
    "BLEU drop": "the result file has no removal score for this head.",
    "loss rise (approximate)": "the result file has no removal score for this head.",
}
ROLE_FORMATS = {"figure": "%.3f", "importance": "%.3f", "BLEU drop": "%.2f", "loss rise (approximate)": "%.4f"}


def stats_table(result: dict) -> pd.DataFrame:
    """The numbers behind the three grids, a row per head: each statistic's mean (and spread) over the
    sentences, and the normalised importance."""
    importance = {(r["kind"], r["layer"], r["head"]): r.get("normalized") for r in result["importance"]}
    return pd.DataFrame([{**r, "kind": KIND_LABELS.get(r["kind"], r["kind"]),
                          "importance (normalised)": importance.get((r["kind"], r["layer"], r["head"]))}
                         for r in result["stats"]])


def show_result(result: dict, carried: dict[str, str], attention_page, name: str) -> None:
    """The head lab's figures and tables; `name`: the checkpoint's, first in every downloaded file's name."""
    settings = result.get("settings", {})        # read back from runs/heads/: its strings are shown as text
    full = result["pruning"].get("full", {})
    st.caption(f"{md_escape(settings.get('sentences', '?'))} sentences, "
               f"forced: {md_escape(settings.get('forced', '?'))}, "
               f"{md_escape(settings.get('seeds', '?'))} random seeds; full model greedy BLEU "
               f"{full.get('bleu', float('nan')):.2f}, chrF {full.get('chrf', float('nan')):.2f}; "
               f"computed in {md_escape(result.get('seconds', '?'))} s. Rare-word frequencies from "
               f"{md_escape(result.get('rare_frequencies', '?'))}.")
    st.subheader("Confidence, entropy and importance per head")
    downloads.chart(plots.head_grids(result["stats"], "confidence", "Confidence: mean maximum attention weight"),
                    downloads.file_stem(name, "heads_confidence"), key="heads_confidence")
    downloads.chart(plots.head_grids(result["stats"], "entropy", "Entropy of the attention distribution (nats)"),
                    downloads.file_stem(name, "heads_entropy"), key="heads_entropy")
    downloads.chart(plots.head_grids(result["importance"], "normalized",
                                     "Importance |∂L/∂ξ|, normalised per layer (Michel et al.)"),
                    downloads.file_stem(name, "heads_importance"), key="heads_importance")
    downloads.table_csv_button(stats_table(result), downloads.file_stem(name, "head_lab_statistics"),
                               key="heads_stats_csv", label="Confidence, entropy and importance per head (CSV)")
    st.subheader("Roles")
    table = roles_table(result, carried)
    shown, config = tables.shown(table, ROLE_FORMATS, ROLE_COLUMN_HELP, ROLE_COLUMN_EMPTY)
    st.dataframe(shown, hide_index=True, key="heads_roles", column_config={
        **config, "zoom": st.column_config.LinkColumn("zoom", display_text="open in Attention")})
    scoring = removal_scoring(result)
    downloads.table_csv_button(table.drop(columns=["zoom"]), downloads.file_stem(name, "head_lab_roles"),
                               key="heads_roles_csv",
                               label="Roles, importance and " + ("BLEU drop" if scoring == "bleu" else "loss rise")
                               + " as CSV")
    downloads.bundle_button(lambda: result, downloads.file_stem(name, "head_lab"), key="heads_json",
                            label="The whole head lab, pruning curves included (JSON)")
    heads = [(r["kind"], r["layer"], r["head"]) for r in result["roles"]]
    if heads:
        pick = st.selectbox("Zoom into a head on the current sentence", range(len(heads)), key="heads_zoom",
                            format_func=lambda i: f"{KIND_LABELS.get(heads[i][0], heads[i][0])}, layer "
                                                  f"{heads[i][1]}, head {heads[i][2]}: "
                                                  f"{result['roles'][i].get('role') or NO_ROLE}")
        kind, layer, head = heads[pick]
        st.page_link(attention_page, label=md_escape(f"Open {KIND_LABELS.get(kind, kind)} layer {layer} head {head} "
                                                     "on the Attention page"), icon=":material/zoom_in:",
                     query_params=zoom_query(kind, layer, head, carried))
    st.subheader("Removing one head")
    if scoring == "loss":
        st.caption("Scored by the **loss rise alone (approximate)**: each head was removed and the teacher-forced "
                   "loss measured; no removal was translated, so there is no BLEU drop per head. Choose “"
                   + SCORINGS["bleu"] + "” above for the exact BLEU drop.")
    else:
        st.caption("Scored by the **BLEU drop (exact)**: the test sentences translated again without each head.")
    downloads.chart(plots.removal_histogram(result["single_head_removal"], REMOVAL_COLUMNS[scoring][0]),
                    downloads.file_stem(name, "heads_removal"), key="heads_removal")
    st.caption("The numbers: the Roles table's “" + REMOVAL_COLUMNS[scoring][1] + "” column and its CSV above.")
    st.subheader("Pruning curves")
    downloads.chart(plots.pruning_figure(result["pruning"].get("curves", [])),
                    downloads.file_stem(name, "heads_pruning"), key="heads_pruning")
    downloads.bundle_button(lambda: {"full": result["pruning"].get("full"),
                                     "curves": result["pruning"].get("curves", [])},
                            downloads.file_stem(name, "heads_pruning"), key="heads_pruning_json",
                            label="The pruning curves (JSON)")
    within = result["pruning"].get("removable_within_1_bleu", {})
    if within:
        st.caption("Heads removable (least important first) before BLEU falls more than 1 point: " +
                   md_escape(", ".join(f"{plots.SCOPE_LABELS.get(s, s)} {n}" for s, n in within.items())) + ".")

