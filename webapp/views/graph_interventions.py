"""The Graphs page's interventions: kept feature nodes removed (set to 0) or clamped to a value, and two
answers side by side: what the graph predicts (its replacement model with every other node held: the
node's edges into the logit, scaled) and what the model actually does (run again with the feature's share
of its FFN moved, attention, norms and every later feature live; explorer.studies.graphs.intervene). Where
the two agree, the graph's edges say what the model does; where they differ, the effect runs through what
the graph holds fixed. Ameisen et al. 2025 check their graphs the same way.

Computed on the shared model in its queue and cached for every session (webapp.feature_analyses.graph_intervention);
the nodes and the value are in the URL.
"""
from __future__ import annotations

import streamlit as st

from explorer.studies.graphs.rows import node_rows
from webapp import feature_analyses, state
from webapp import url_keys as url
from webapp.views.features import site_label

WIDGET = "graphs_change"


def picked_nodes(ids: list[str], labels: dict[str, str]) -> list[str]:
    """The multiselect of kept feature nodes (the link's picks that are kept nodes; else the last picks still
    kept; else the most influential node), written back to the URL."""
    linked = url.linked(url.GRAPH_CHANGE)
    if linked is not None:
        url.hold(WIDGET, url.listed(linked, ids))
    else:
        before = st.session_state.get(WIDGET, st.session_state.get("_" + WIDGET))
        url.hold(WIDGET, [i for i in before if i in ids] if isinstance(before, list) else ids[:1])
    picked = st.multiselect("Feature nodes to change", ids, key=WIDGET, format_func=labels.get)
    url.put(**{url.GRAPH_CHANGE.key: url.list_text(picked)})        # emptied: "none", so a link reopens it so
    st.session_state["_" + WIDGET] = list(picked)
    return list(picked)


def section(ckpt, dictionaries: str, text: str, target: str, graph: dict) -> None:
    st.subheader("Intervene: remove or clamp feature nodes")
    rows = sorted((r for r in node_rows(graph) if r["kind"] == "feature"), key=lambda r: -r["influence"])
    if not rows:
        st.info("No feature node is kept at this threshold: raise it to have nodes to change.")
        return
    by_id = {r["id"]: r for r in rows}
    labels = {i: f"#{r['latent']} · {site_label(r['site'])} · {r['side']} {r['position'] + 1} {r['piece']}"
              for i, r in by_id.items()}
    left, right = st.columns([3, 1])
    with left:
        picked = picked_nodes(list(by_id), labels)
    with right:
        url.seed(url.GRAPH_VALUE, "graphs_value", 0.0, low=0.0, high=url.GRAPH_VALUE.high)
        value = st.number_input("Set them to (0 removes)", 0.0, float(url.GRAPH_VALUE.high), key="graphs_value",
                                step=0.5)
        url.write(url.GRAPH_VALUE, "graphs_value", float(value), default=0.0)
    if not picked:
        st.info("Pick feature nodes above: each is set to the value at its position, and the model and the graph "
                "are asked what the explained logit becomes.")
        return
    changes = tuple((by_id[i]["site"], by_id[i]["position"], by_id[i]["latent"], float(value)) for i in picked)
    done = state.friendly(feature_analyses.graph_intervention, ckpt, dictionaries, text, target,
                          graph["settings"]["position"], graph["settings"]["foil"], changes, what="The intervention")
    if done is None:
        return
    c1, c2, c3 = st.columns(3)
    c1.metric("Explained logit before", f"{done.logit_before:.3f}")
    c2.metric("The graph predicts", f"{done.logit_graph:.3f}", f"{done.graph_change:+.3f}",
              help="The replacement model with these nodes changed and every other node held: attention "
                   "patterns, norms, the other features and the errors at the sentence's values.")
    c3.metric("The model does", f"{done.logit_model:.3f}", f"{done.model_change:+.3f}",
              help="The model run again with each feature's share of its FFN's output moved: attention, norms "
                   "and every later feature live.")
    word = graph["explained"]["piece"].replace("▁", "")
    st.caption(f"log p({word}) {done.logprob_before:.3f} → {done.logprob_model:.3f} in the model. "
               + agreement(done.graph_change, done.model_change))


def agreement(graph_change: float, model_change: float) -> str:
    """One sentence on how far the graph's prediction is from the model's answer."""
    gap = abs(graph_change - model_change)
    scale = max(abs(graph_change), abs(model_change), 1e-6)
    if gap <= 0.1 * scale:
        return "The graph's prediction is within 10% of the model's change: its edges account for the effect."
    if (graph_change > 0) != (model_change > 0) and min(abs(graph_change), abs(model_change)) > 1e-3:
        return ("The graph and the model disagree in sign: the effect runs through what the graph holds fixed "
                "(attention moving, later features switching on or off).")
    return (f"The model's change differs from the graph's by {gap:.3f}: part of the effect runs through what the "
            "graph holds fixed (attention moving, later features switching on or off).")
