"""Checkpoints: every checkpoint in a table, two of them compared on one input, and a run's
attention scrubbed across its checkpoints.

The tab, the A/B pair (by checkpoint name) and the scrubber's run, attention kind, layer, head and
checkpoint are in the URL (webapp.url_keys). Decoder rows are labelled by the token they write, as on
the Attention page (webapp.numbering).

Thin: widgets -> cached models.translate / models.attention and explorer.evaluation.comparison (which reuses
the library's own scoring, tracing and BLEU) -> explorer.plots.training.
"""
from __future__ import annotations

import streamlit as st

from webapp import presenter, state
from webapp.views import checkpoints as views

st.title("Checkpoints")
# The page's parts in the order of the mode (webapp.presenter.areas): on a projector the tabs first.
area = presenter.areas(lecture=("tabs", "learn"), study=("learn", "tabs"))
with area["learn"]:
    state.learn(
        "Every checkpoint a run saved, shipped ones first. Compare two on the same sentence (e.g. an early and a "
        "late one, or before and after fine-tuning): their translations, how likely each finds the other's output, "
        "their attention and its difference, test-set BLEU and how far each layer's weights moved.",
        r"\Delta_{layer} = \frac{\lVert W^{B}_{layer} - W^{A}_{layer} \rVert_2}{\lVert W^{A}_{layer} \rVert_2}")

with area["tabs"]:
    infos = state.available_checkpoints()
    if not infos:
        st.info("No checkpoint yet: train one on the Train page.")
        st.stop()
    healthy = [i for i in infos if not i.error]
    # The open tab is in the URL (?tab=...), kept by Streamlit itself (an unknown tab name is removed).
    tab_table, tab_compare, tab_scrub = st.tabs(["All checkpoints", "Compare two", "Attention over training"],
                                                key="tab", bind="query-params")
    with tab_table:
        views.table(infos)
    with tab_compare:
        views.compare(healthy)
    with tab_scrub:
        views.scrubber(healthy)
