"""The Translate page's verdict: grounded or guessing, in one plain sentence where the audience looks,
with the source words the training data never (or rarely) showed marked.

The index of a dataset is loaded once per dataset and shared (st.cache_resource, at most MAX_INDEXES:
the Bible's holds about 30 MB of counts in memory); the verdict itself is a few dictionary lookups per
word. A model that names no training data (an imported one) gets a caption saying so instead.
"""
from __future__ import annotations

import streamlit as st

from explorer.studies.grounding.build import NoTrainingData, dataset_of, ensure
from explorer.studies.grounding.index import IndexUnusable
from explorer.studies.grounding.verdict import verdict
from webapp.text_safety import md_escape

MAX_INDEXES = 4                 # datasets whose counts stay loaded (one per shipped dataset, with room)


@st.cache_resource(max_entries=MAX_INDEXES, show_spinner="Counting the training data (once)…")
def _index(dataset: str, _checkpoint: str, _meta: dict):
    return ensure(_checkpoint, _meta)


def _marked(words, seen: str) -> str:
    shown = list(dict.fromkeys(w.word for w in words if w.seen == seen))
    return ", ".join(f"**{md_escape(w)}**" for w in shown[:12]) + (" …" if len(shown) > 12 else "")


def show_verdict(ckpt, text: str, output: str) -> None:
    """The verdict on `text` for this checkpoint, under its translation `output`."""
    try:
        index = _index(dataset_of(ckpt.meta), str(ckpt.path), ckpt.meta)
    except (NoTrainingData, IndexUnusable) as err:
        st.caption(f"No verdict on this translation: {md_escape(err)}.")
        return
    found = verdict(index, text, ckpt.name)
    with st.container(key="grounding_verdict"):
        if found.guessing:
            st.warning("**Guessing.** " + md_escape(found.summary))
        else:
            st.success("**Grounded.** " + md_escape(found.summary))
        if not output.strip():
            st.caption("The output is empty: the model's most likely first word was the end of the sentence, "
                       "which it does when nothing in the text looks like its training data.")
        never, rare = _marked(found.words, "never"), _marked(found.words, "rare")
        parts = ([f"never in its training data: {never}"] if never else []) + \
                ([f"seen fewer than 3 times: {rare}"] if rare else [])
        if parts:
            st.caption("Source words " + "; ".join(parts) + ".")
        st.caption(f"Score {found.score:.2f} nats per word against this model's threshold {found.threshold:.2f} "
                   "(how surprising the sentence is to a word-pair model of the training sources; calibrated "
                   "on held-out pairs). `python -m explorer grounding` gives the same verdict for a file.")
