"""Graphs: how one output word was made. An attribution graph (explorer.studies.graphs, docs/GRAPHS.md) of
the word's logit through a replacement model: every FFN replaced by its dictionary (the Features page's
transcoders), attention patterns and norms held at the sentence's values, error nodes making it exact.

Thin: the shared sentence and its translation (webapp.sentence) -> every layer's dictionary, or one job
training the missing ones (webapp.views.graph_dictionaries) -> the word and foil (in the URL) -> the graph,
drawn by a background job and kept as a file (webapp.views.graphs) -> explorer.plots.graphs; then feature
nodes removed or clamped, the model beside the graph (webapp.views.graph_interventions).
"""
import streamlit as st

from webapp import downloads, models, presenter, sentence, state
from webapp.views import graph_dictionaries, graph_interventions
from webapp.views import graphs as views

st.title("Graphs: how was this word made?")
area = presenter.areas(lecture=("sentence", "graph", "learn"), study=("learn", "sentence", "graph"))
with area["learn"]:
    state.learn(
        "An **attribution graph** (Ameisen et al. 2025, \"Circuit Tracing\"; the open tool **circuit-tracer**) "
        "explains one output word's logit. Every FFN is replaced by its dictionary (the Features page's "
        "transcoders) plus an **error node** holding what the dictionary misses, and every attention pattern and "
        "LayerNorm scale is held at this sentence's values: what is left is linear, so the logit is its bias "
        "plus a sum of **edges**, each one node's direct effect. The nodes are the source's and the output's "
        "token embeddings, each active feature at each position and layer, and the errors; an edge from the "
        "source side to the output side runs through cross-attention. A node's **influence** is how much of the "
        "logit reaches it along every path; the graph keeps the nodes holding the threshold's share of it. "
        "The replacement gives this sentence's logit exactly, but its account of *how* (which features, which "
        "routes) is the replacement's, with attention frozen: **intervene** below (remove or clamp feature "
        "nodes) to compare the graph's prediction with what the model does, attention and later features live.",
        state.equations(r"\mathrm{logit} = b + \sum_{s} a_s \, \frac{\partial\, \mathrm{logit}}{\partial a_s}",
                        r"\text{influence} = w\,\hat A + w\,\hat A^2 + \dots = w\,\hat A\,(I - \hat A)^{-1}"))

with area["sentence"]:
    ckpt = models.require_checkpoint()
    cfg = state.decode_settings()
    text, clipped, result = sentence.page_translation(ckpt, "graphs_text_box", cfg, "to see how a word was made.")
name = downloads.file_stem(ckpt.name)
with area["graph"]:
    transcoders = graph_dictionaries.ready_or_offer(ckpt)
    target = result.text
    asked = views.question_controls(ckpt, clipped, target)
    if asked is None:
        st.stop()
    position, foil = asked
    dictionaries = graph_dictionaries.stamp(ckpt)
    out = views.result_path(ckpt, clipped, target, position, foil, dictionaries)
    found = views.computed_or_started(ckpt, out, clipped, target, position, foil, transcoders, dictionaries)
    if found is None:
        st.stop()
    graph = views.show(found, name)
    views.feature_nodes(graph, name)
    graph_interventions.section(ckpt, dictionaries, clipped, target, graph)
