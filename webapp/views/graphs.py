"""The Graphs page's parts: the question (an output word of the shared sentence's translation, and a foil),
its attribution graph computed in the background (explorer.studies.graphs.job.GRAPH_THRESHOLDS on a private
copy of the checkpoint, webapp.study_job) and kept as one JSON file under the runs directory, named by the
weights, the question and the dictionaries (a rerun, another session or a shared link reads the file, never
computes it again); the figure with its node threshold, the exactness and scores beside it, the kept
feature nodes with a link each to their Features page, and the downloads.

The threshold slider picks among the node thresholds the job pruned the one graph at
(job.NODE_THRESHOLDS): re-pruning at another value would need the whole adjacency matrix, which on
bible-es-en is ~180 MB per graph, too much to keep per question; the pruned graphs are a few hundred kB.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from explorer.files.names import GRAPHS
from explorer.plots import graphs as plots
from explorer.store import run_paths as rp
from explorer.studies.contrastive.foils import MAX_FOIL_CHARS
from explorer.studies.graphs.job import GRAPH_THRESHOLDS, NODE_THRESHOLDS, GraphSettings
from explorer.studies.graphs.rows import check_graph, layer_count, node_rows, source_words
from explorer.studies.graphs.step import question
from webapp import background, downloads, estimates, feature_analyses, lecture, presenter, state, study_job
from webapp import url_keys as url
from webapp.text_safety import md_escape
from webapp.views.features import site_key, site_label

FEATURES_PAGE = "webapp/pages/features.py"
DEFAULT_THRESHOLD = 0.8                     # the command's and circuit-tracer's default node threshold
# Words a translation often opens with that carry little of the sentence (English, German, Spanish): the
# page opens on the first output word that is none of them (or on position 1).
FUNCTION_WORDS = {"the", "and", "for", "but", "that", "with", "this", "der", "die", "das", "und", "ein", "eine",
                  "den", "dem", "des", "el", "la", "los", "las", "que", "del", "con", "por", "una", "y"}


def output_labels(ckpt, text: str, target: str) -> list[str]:
    """The output's pieces as the position picker shows them, 1-based, the end of sentence named."""
    asked = question(ckpt.model, ckpt.tokenizer, text, 0, target)
    eos = ckpt.model.cfg.special.eos
    return [f"{k + 1}. " + ("end of sentence" if t == eos else ckpt.tokenizer.id_to_piece(int(t), "tgt"))
            for k, t in enumerate(asked.output)]


def first_content_word(labels: list[str]) -> int:
    """The first output piece that starts a word of three letters or more that is not a function word."""
    for k, shown in enumerate(labels):
        piece = shown.split(". ", 1)[1]
        word = re.sub(r"[^\w]", "", piece.replace("▁", ""))
        if piece.startswith("▁") and len(word) >= 3 and word.lower() not in FUNCTION_WORDS:
            return k
    return 0


def question_controls(ckpt, text: str, target: str) -> tuple[int, str | None] | None:
    """(position K, foil word or None) from the page's controls (in the URL); None after a message."""
    labels = state.friendly(output_labels, ckpt, text, target, what="Reading the translation")
    if labels is None:
        return None
    options = {str(k + 1): k for k in range(len(labels))}                     # 1-based in the URL
    default = first_content_word(labels)
    left, right = st.columns([2, 1])
    url.seed(url.GRAPH_WORD, "graphs_word", default, options=options)
    position = left.selectbox("Output word to explain", range(len(labels)), key="graphs_word",
                              format_func=lambda k: labels[k])
    url.write(url.GRAPH_WORD, "graphs_word", position, options=options)
    linked_foil = url.seed(url.FOIL_WORD, "graphs_foil", "")
    if len(linked_foil) > MAX_FOIL_CHARS:                      # a link's: cut to what the box takes
        url.hold("graphs_foil", linked_foil[:MAX_FOIL_CHARS])
    foil = right.text_input("…rather than (a foil word, optional)", key="graphs_foil", max_chars=MAX_FOIL_CHARS,
                            help="Explain logit(this word) − logit(the foil's first piece): why this word and "
                                 "not that one.")
    url.write(url.FOIL_WORD, "graphs_foil", foil.strip(), default="")
    if foil.strip():
        from explorer.studies.graphs.step import foil_token
        asked = state.friendly(question, ckpt.model, ckpt.tokenizer, text, int(position), target, what="The question")
        if asked is None or state.friendly(foil_token, ckpt.model, ckpt.tokenizer, foil, asked.step.token,
                                           what="The foil") is None:
            return None
    return int(position), foil.strip() or None


def result_path(ckpt, text: str, target: str, position: int, foil: str | None, dictionaries: str) -> Path:
    key = {"text": text, "target": target, "position": position, "foil": foil, "dictionaries": dictionaries,
           "thresholds": list(NODE_THRESHOLDS), "edge_threshold": GraphSettings().edge_threshold}
    return rp.analysis_file(GRAPHS, ckpt.cache_key[1], key)


def computed_or_started(ckpt, out: Path, text: str, target: str, position: int, foil: str | None,
                        transcoders: dict, dictionaries: str) -> dict | None:
    """The graph's result file read (cached), or the job drawing it started (unless one ran and failed or
    was cancelled: then its message and a start button), its progress shown, and None."""
    def begin() -> background.Job:
        return study_job.start(GRAPH_THRESHOLDS, out, "Graph", ckpt.path, lambda _: (text, transcoders),
                               GraphSettings(position=position), target=target, foil=foil)

    found = feature_analyses.graph_result(str(out), _mtime(out))
    if found is not None:
        problem = damage(found)
        if problem is None:
            return found
        st.error(f"The graph result file {out} is damaged ({problem}): draw the graph again.")
        study_job.tail(out, "Draw the graph again", "graphs", begin)
        return None
    if background.job_for(out) is None:              # a new question: no button to press
        estimate = estimates.graph(ckpt, dictionaries, text, target, position, foil, transcoders)
        st.session_state["_graphs_estimate"] = (str(out), estimate)
        begin()
    said = st.session_state.get("_graphs_estimate", ("", ""))
    job = background.job_for(out)
    if job is not None and job.active:               # not beside a cancelled or failed job's own message
        st.info("Drawing the graph in the background, one backward pass through the replacement model per 64 "
                "feature nodes" + (f". {said[1]}." if said[0] == str(out) else ": a few seconds on the numbers "
                                   "models, one to three minutes on bible-es-en on two cores.")
                + " It is kept: this word's graph opens at once next time, also from a shared link.")
    study_job.tail(out, "Draw the graph again", "graphs", begin)
    return None


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def threshold_control() -> float:
    options = {url.UrlKey.text(t): t for t in NODE_THRESHOLDS}
    url.seed(url.GRAPH_NODES, "graphs_nodes", DEFAULT_THRESHOLD, options=options)
    shown = st.select_slider("Node threshold: the kept nodes hold this share of the influence on the logit",
                             NODE_THRESHOLDS, key="graphs_nodes", format_func=lambda t: f"{t:.0%}",
                             help="Pruned from the same graph at each value: no recomputation.")
    url.write(url.GRAPH_NODES, "graphs_nodes", shown, options=options, default=DEFAULT_THRESHOLD)
    return float(shown)


def graph_at(result: dict, threshold: float) -> dict:
    """The graph pruned at the result's node threshold nearest `threshold`; ValueError naming the field when
    the result holds no list of thresholds with one graph each (a damaged file: damage() says it first)."""
    settings = result.get("settings")
    thresholds = settings.get("thresholds") if isinstance(settings, dict) else None
    if not (isinstance(thresholds, list) and thresholds and all(type(t) in (int, float) for t in thresholds)):
        raise ValueError("settings.thresholds: empty or not a list of node thresholds")
    graphs = result.get("graphs")
    if not (isinstance(graphs, list) and len(graphs) == len(thresholds)):
        raise ValueError(f"graphs: not a list of {len(thresholds)} graphs, one per node threshold")
    return graphs[min(range(len(thresholds)), key=lambda i: abs(thresholds[i] - threshold))]


def damage(result: dict) -> str | None:
    """What is wrong inside a graph result file whose keys are whole (GRAPH_THRESHOLDS.read checks only
    those), naming the field; None when every graph in it is what the job writes. The page says it in one
    message, never a traceback or a node drawn at a wrong place."""
    try:
        graph_at(result, DEFAULT_THRESHOLD)
        for i, graph in enumerate(result["graphs"]):
            try:
                check_graph(graph)
            except ValueError as err:
                raise ValueError(f"graphs[{i}].{err}") from None
    except ValueError as err:
        return str(err)
    return None


def n_encoder(graph: dict) -> int:
    return sum(site.startswith("encoder.") for site in graph["metadata"]["transcoder_list"])


def top_source_words(graph: dict) -> str:
    """Where the logit's influence comes from, in words."""
    at = graph["position_influence"]
    top = graph["top_source_position"]
    share = at[top] / max(sum(at), 1e-30)
    piece = source_words(graph)[top].replace("▁", "")
    return (f"**{share:.0%}** of the influence reaching the graph's inputs reaches the source word "
            f"**{md_escape(piece)}** (source position {top + 1}): the source position this word comes from most.")


def show(result: dict, name: str) -> dict:
    """The figure and what stands beside it; the graph shown (at the slider's threshold)."""
    threshold = threshold_control()
    graph = graph_at(result, threshold)
    rows = node_rows(graph)
    e = graph["explained"]
    word = e["piece"].replace("▁", "") or e["piece"]
    what = f"logit of “{word}”" + (" minus the foil's" if e["foil"] is not None else "")
    title = f"How “{plots.label(word)}” was made: {graph['counts']['kept_nodes']} of " \
            f"{sum(graph['counts'][k] for k in ('features', 'errors', 'tokens')) + 1} nodes kept"
    fig = plots.graph_figure(rows, graph["links"], graph["metadata"]["prompt_tokens"], graph["counts"]["source"],
                             n_encoder(graph), layer_count(graph), title)
    left, right = st.columns([3, 1])
    with left:
        downloads.chart(fig, downloads.file_stem(name, "graph", f"word{graph['settings']['position'] + 1}"),
                        key="graphs_figure", on_click=_clicked)
    with right:
        st.markdown(f"**Explained:** the {md_escape(what)}, p = {e['probability']:.3f}")
        st.markdown(f"**Logit vs bias + edges:** {e['logit']:.4f} = {e['bias']:.4f} + {e['edges']:.4f} "
                    f"(off by {graph['logit_error']:.1e})")
        st.markdown(f"**Replacement vs model:** largest logit difference {graph['replacement_logit_error']:.1e}")
        s = graph["scores"]
        st.markdown(f"**Replacement score** {s['replacement']:.3f} · **completeness** {s['completeness']:.3f}",
                    help="Replacement: the share of the influence reaching the graph's inputs that reaches tokens "
                         "rather than error nodes. Completeness: each node's share of inputs that are not errors, "
                         "weighted by its influence. 1 when the dictionaries carry everything.")
        st.markdown(top_source_words(graph))
        if e.get("foil_note"):
            st.caption(md_escape(e["foil_note"]))
    st.caption(f"{graph['counts']['features']:,} active features, {graph['counts']['errors']:,} error nodes and "
               f"{graph['counts']['tokens']} tokens in the whole graph; kept {graph['counts']['kept_nodes']} nodes "
               f"and {graph['counts']['kept_links']:,} links"
               + (f" (the {plots.MAX_LINKS_DRAWN} strongest drawn; every one in the CSV)"
                  if graph["counts"]["kept_links"] > plots.MAX_LINKS_DRAWN else "")
               + ". Red links push their target up, blue ones down.")
    return graph


def _clicked() -> None:
    point = downloads.clicked_point("graphs_figure")
    node = (point or {}).get("customdata")
    if isinstance(node, list) and node:
        node = node[0]
    if isinstance(node, str) and re.fullmatch(r"\d+_\d+_\d+", node):
        st.session_state["graphs_node"] = node


def feature_url(row: dict, carried: dict[str, str]) -> str:
    return "features?" + urlencode(feature_query(row, carried))


def feature_query(row: dict, carried: dict[str, str]) -> dict[str, str]:
    return {**carried, url.FEAT_SITE.key: site_key(row["site"]), url.FEAT_ID.key: str(row["latent"])}


def feature_nodes(graph: dict, name: str) -> None:
    """The kept feature nodes, strongest first, each linked to its Features page; the one picked (or
    clicked in the figure) as a link of its own."""
    carried = lecture.carried_query()
    rows = sorted((r for r in node_rows(graph) if r["kind"] == "feature"), key=lambda r: -r["influence"])
    if not rows:
        st.info("No feature node is kept at this threshold: raise it to keep more.")
        return
    ids = [r["id"] for r in rows]
    by_id = {r["id"]: r for r in rows}
    url.seed(url.GRAPH_NODE, "graphs_node", ids[0], options=ids)
    picked = st.selectbox("Feature node (or click one in the figure)", ids, key="graphs_node",
                          format_func=lambda i: node_label(by_id[i]))
    url.write(url.GRAPH_NODE, "graphs_node", picked, options=ids, default=ids[0])
    row = by_id[picked]
    st.page_link(FEATURES_PAGE, label=md_escape(f"Open feature #{row['latent']} of {site_label(row['site'])} on the "
                                                "Features page"), icon=":material/open_in_new:",
                 query_params=feature_query(row, carried))
    table = pd.DataFrame([{"layer": site_label(r["site"]), "position": r["position"] + 1, "piece": r["piece"],
                           "feature": r["latent"], "activation": r["activation"], "influence": r["influence"],
                           "open": feature_url(r, carried)} for r in rows])
    st.dataframe(table, hide_index=True, key="graphs_nodes_table", **presenter.table_columns(
        {"layer": 160, "position": 80, "piece": 140, "feature": 90, "activation": 110, "influence": 110,
         "open": 160},
        {"open": st.column_config.LinkColumn("open", display_text="Features page"),
         "activation": st.column_config.NumberColumn(format="%.3f"),
         "influence": st.column_config.NumberColumn(format="%.4f")}))
    stem = downloads.file_stem(name, "graph", f"word{graph['settings']['position'] + 1}")
    downloads.table_csv_button(pd.DataFrame(node_rows(graph)), stem + "_nodes", key="graphs_nodes_csv",
                               label="Every kept node (CSV)")
    downloads.table_csv_button(pd.DataFrame(graph["links"]), stem + "_links", key="graphs_links_csv",
                               label="Every kept link (CSV)")
    downloads.bundle_button(lambda: graph, stem, key="graphs_json",
                            label="The graph in circuit-tracer's JSON format (with this project's keys)")


def node_label(row: dict) -> str:
    return (f"#{row['latent']} · {site_label(row['site'])} · {row['side']} {row['position'] + 1} "
            f"{row['piece']} · influence {row['influence']:.3f}")
