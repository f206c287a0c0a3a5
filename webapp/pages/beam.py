"""Beam search, step by step: the candidates of every step, the tree, attention, and forcing.

Thin: widgets -> models.translate (cached, trace=True) / models.attention -> explorer.plots.beams.
Below the step, why its token and not a foil (webapp.views.beam_contrast: a click on a tree node picks
one); at the end, where a test verse's or a typed reference left the beam (webapp.views.beam_fall).
The view lives in the URL (webapp.url_keys: beam size, penalty and α, step, rank, layer, the tree's
marks, the contrast's foil and method, the test verse; all 1-based, like the widgets), so a view of
step 7's third candidate against its second alternative can be shared by link.
Steps, ranks and hypothesis slots count from 1 on the page and in its CSV.
"""
from __future__ import annotations

import streamlit as st

from webapp import state
from webapp.views import beam as views

st.title("Beam search, step by step")
state.learn(
    "Beam search keeps the *k* best partial translations. At every step each of them proposes its "
    "best next tokens; the 2k best extensions by cumulative log-probability are ranked, the best *k* "
    "unfinished ones are **kept**, the rest **pruned**, and those ending in `</s>` are **finished**. "
    "Finished hypotheses are compared by a length-normalised score, or short ones would always win. "
    "Two questions the tree answers: *why this word and not that one* at a step (a contrastive attribution: "
    "which inputs moved log p(chosen) − log p(foil)), and, for a reference, *did the search lose it* (a "
    "**search error**: the model scores it higher than its output) *or does the model prefer its own "
    "output* (a **model error**).",
    state.equations(r"\mathrm{score}(y) = \sum_{t=1}^{|y|} \log p(y_t \mid y_{<t}, x)",
                    r"\mathrm{norm}(y) = \frac{\mathrm{score}(y)}{lp(|y|)}",
                    r"lp_{\mathrm{GNMT}}(n) = \left(\frac{5 + n}{6}\right)^{\alpha},\; lp_{\mathrm{avg}}(n) = n"))


views.main()
