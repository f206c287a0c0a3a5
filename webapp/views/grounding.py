"""The Translate page's verdict: grounded or guessing, in one plain sentence where the audience looks,
with the source words the training data never (or rarely) showed and the output words no word of the
source brings along in it (explorer.studies.grounding.links) marked.

The index of a dataset is loaded once per dataset and shared (st.cache_resource, at most MAX_INDEXES:
the Bible's holds about 40 MB of counts and links in memory); the verdict itself is a few dictionary
lookups per word. A model that names no training data (an imported one) gets a caption saying so instead.
"""
from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from explorer.studies.grounding.build import NoTrainingData, dataset_of, ensure
from explorer.studies.grounding.index import IndexUnusable
from explorer.studies.grounding.links import marked
from explorer.studies.grounding.verdict import Verdict, verdict
from explorer.studies.grounding.words import words
from webapp import downloads
from webapp.text_safety import md_escape

MAX_INDEXES = 4                 # datasets whose counts stay loaded (one per shipped dataset, with room)
MARK = "orange-background"      # how a made-up output word is marked in the translation box
_SHOWN_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+")     # a word as written (words() lowercases it)


@st.cache_resource(max_entries=MAX_INDEXES, show_spinner="Counting the training data (once)…")
def _index(dataset: str, _checkpoint: str, _meta: dict):
    return ensure(_checkpoint, _meta)


def verdict_for(ckpt, text: str, output: str) -> Verdict | str:
    """The verdict on `text` and its translation `output` for this checkpoint, or why there is none."""
    try:
        index = _index(dataset_of(ckpt.meta), str(ckpt.path), ckpt.meta)
    except (NoTrainingData, IndexUnusable) as err:
        return str(err)
    return verdict(index, text, ckpt.name, output)


def as_json(found: Verdict | str) -> dict:
    """The verdict as the Translate page's JSON bundle holds it (or why there is none)."""
    return found.to_json() if isinstance(found, Verdict) else {"none": found}


def translation_markdown(output: str, found: Verdict | str) -> str:
    """The translation as Markdown shown character for character, its marked words on an orange ground."""
    made_up = set(marked(found.output)) if isinstance(found, Verdict) else set()
    parts, at = [], 0
    for match in _SHOWN_WORD.finditer(output):
        parts.append(md_escape(output[at:match.start()]))
        word = md_escape(match.group(0))
        parts.append(f":{MARK}[{word}]" if words(match.group(0))[:1] and words(match.group(0))[0] in made_up else word)
        at = match.end()
    parts.append(md_escape(output[at:]))
    return "".join(parts)


def _listed(shown: list[str]) -> str:
    return ", ".join(f"**{md_escape(w)}**" for w in shown[:12]) + (" …" if len(shown) > 12 else "")


def _source(found: Verdict, seen: str) -> list[str]:
    return list(dict.fromkeys(w.word for w in found.words if w.seen == seen))


def links_table(found: Verdict) -> pd.DataFrame:
    """Each output word, where the training data has it from: the source word that brings it along most
    often, in how many of the training pairs with that source word."""
    return pd.DataFrame([{"output word": w.word,
                          "brought along by": "" if w.source is None else w.source,
                          "training pairs with both": w.together or None,
                          "training pairs with that source word": w.of or None,
                          "verdict": "made up" if w.marked else "common word" if w.source is None else "linked"}
                         for w in found.output])


def show_verdict(found: Verdict | str, output: str) -> None:
    """The verdict under the translation `output` (found by verdict_for)."""
    if isinstance(found, str):
        st.caption(f"No verdict on this translation: {md_escape(found)}.")
        return
    with st.container(key="grounding_verdict"):
        if found.guessing:
            st.warning("**Guessing.** " + md_escape(found.summary))
        else:
            st.success("**Grounded.** " + md_escape(found.summary))
        if not output.strip():
            st.caption("The output is empty: the model's most likely first word was the end of the sentence, "
                       "which it does when nothing in the text looks like its training data.")
        never, rare = _source(found, "never"), _source(found, "rare")
        parts = ([f"never in its training data: {_listed(never)}"] if never else []) + \
                ([f"seen fewer than 3 times: {_listed(rare)}"] if rare else [])
        if parts:
            st.caption("Source words " + "; ".join(parts) + ".")
        made_up = marked(found.output)
        if made_up:
            st.caption(f"Output words (on orange) that no word of this sentence brings along in the training data: "
                       f"{_listed(made_up)}. The model wrote them without a source word it was shown them with.")
        st.caption(f"Score {found.score:.2f} nats per word against this model's threshold {found.threshold:.2f} "
                   "(how surprising the sentence is to a word-pair model of the training sources; calibrated "
                   "on held-out pairs). `python -m explorer grounding` gives the same verdict for a file.")


def show_links(found: Verdict | str, name: str) -> None:
    """Where each output word comes from in the training data, folded (the end of the page): shown when
    some output word is more than a common word."""
    if not isinstance(found, Verdict) or all(w.source is None and not w.marked for w in found.output):
        return
    with st.expander("Where each output word comes from in the training data"):
        st.caption("A word is brought along by a source word when at least 10% of the training pairs with that "
                   "source word (and two or more) have it in their translation; common words (at least once per "
                   "hundred training pairs) need no source word.")
        table = links_table(found)
        st.dataframe(table, hide_index=True, key="grounding_links")
        downloads.table_csv_button(table, downloads.file_stem(name, "grounding"), key="grounding_csv",
                                   label="This table as CSV")
