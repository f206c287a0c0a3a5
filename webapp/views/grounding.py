"""The Translate page's verdict: grounded or guessing, in one plain sentence where the audience looks,
with the source words the training data never (or rarely) showed and the output words no word of the
source brings along in it (explorer.studies.grounding.links) marked.

The index of a dataset is loaded once per dataset and shared (st.cache_resource, at most MAX_INDEXES:
the Bible's holds about 40 MB of counts and links in memory); the verdict itself is a few dictionary
lookups per word. A model that names no training data (an imported one) gets a caption saying so instead.
"""
from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd
import streamlit as st

from explorer.studies.common.context import RunContext
from explorer.studies.grounding import states
from explorer.studies.grounding.build import (NoTrainingData, dataset_of, ensure, ensure_states,
                                             kept_states_and_why)
from explorer.studies.grounding.index import IndexUnusable
from explorer.studies.grounding.links import marked
from explorer.studies.grounding.verdict import Verdict, verdict
from explorer.studies.common.words import words
from webapp import background, downloads, models
from webapp.text_safety import md_escape

MAX_INDEXES = 4                 # datasets whose counts stay loaded (one per shipped dataset, with room)
MARK = "orange-background"      # how a made-up output word is marked in the translation box
_SHOWN_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+")     # a word as written (words() lowercases it)


@st.cache_resource(max_entries=MAX_INDEXES, show_spinner="Counting the training data (once)…")
def _index(dataset: str, _checkpoint: str, _meta: dict):
    return ensure(_checkpoint, _meta)


@st.cache_resource(max_entries=MAX_INDEXES, show_spinner=False)
def _state_map(path: str, sha: str, mtime: float, _model, _meta: dict, pairs: int):
    """(the checkpoint's encoder-state map, "") or (None, why a kept one cannot be used: "" when there is
    none); `mtime`: a map built or damaged since is read again."""
    return kept_states_and_why(_model, _meta, pairs)


def state_map_and_why(ckpt, pairs: int):
    """The loaded checkpoint's encoder-state map (shipped or built here) and why a kept one is unusable."""
    path = states.map_path(dataset_of(ckpt.meta), str(ckpt.meta.get("weights_sha256") or ""))
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return _state_map(str(ckpt.path), ckpt.sha256, mtime, ckpt.model, ckpt.meta, pairs)


def state_map(ckpt, pairs: int):
    """The loaded checkpoint's encoder-state map, or None."""
    return state_map_and_why(ckpt, pairs)[0]


def training_index(ckpt):
    """The training-data index of the checkpoint's dataset (counts and links), or None when it has none here."""
    try:
        return _index(dataset_of(ckpt.meta), str(ckpt.path), ckpt.meta)
    except (NoTrainingData, IndexUnusable):
        return None


def verdict_for(ckpt, text: str, output: str) -> Verdict | str:
    """The verdict on `text` and its translation `output` for this checkpoint, or why there is none: on
    both signals when the checkpoint has an encoder-state map, on the training data's counts alone else."""
    try:
        index = _index(dataset_of(ckpt.meta), str(ckpt.path), ckpt.meta)
        smap, why = state_map_and_why(ckpt, index.pairs)
    except (NoTrainingData, IndexUnusable, states.MapUnusable) as err:
        return str(err)
    if smap is None:
        found = verdict(index, text, ckpt.name, output)
        if why:                          # a damaged kept map: said, not skipped in silence
            found = replace(found, summary=f"{found.summary} (The encoder-state map kept for this model cannot "
                                           f"be read: {why}. This verdict reads the training data's counts alone.)")
        return found
    distance = states.distance(smap, states.source_states(ckpt.model, ckpt.tokenizer, [text])[0])
    return verdict(index, text, ckpt.name, output, distance, smap.calibration)


def as_json(found: Verdict | str) -> dict:
    """The verdict as the Translate page's JSON bundle holds it (or why there is none)."""
    return found.to_json() if isinstance(found, Verdict) else {"none": found}


def translation_markdown(output: str, found: Verdict | str) -> str:
    """The translation as Markdown shown character for character, its marked words on an orange ground."""
    return marked_markdown(output, set(marked(found.output)) if isinstance(found, Verdict) else set())


def marked_markdown(text: str, wanted: set[str]) -> str:
    """`text` as Markdown shown as written, each word whose words() form is in `wanted` on an orange ground."""
    parts, at = [], 0
    for match in _SHOWN_WORD.finditer(text):
        parts.append(md_escape(text[at:match.start()]))
        word = md_escape(match.group(0))
        parts.append(f":{MARK}[{word}]" if (words(match.group(0)) or [""])[0] in wanted else word)
        at = match.end()
    parts.append(md_escape(text[at:]))
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
        elif found.partly:               # grounded as a whole, but a word in five or more it was never shown
            st.warning("**Partly guessing.** " + md_escape(found.summary))
        else:
            # what it weighs is the input: a fluent wrong translation of a familiar verse is grounded too
            st.success("**Grounded.** " + md_escape(found.summary) + " That is about the sentence you typed: its "
                       "translation can still be wrong.")
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
        if found.combined is not None:
            st.caption(f"Score {found.combined:+.2f} against this model's threshold {found.threshold:+.2f} (above it "
                       "reads as guessing, below as grounded): the "
                       f"sentence's surprise to a word-pair model of the training sources ({found.score:.2f} nats per "
                       f"word) and its pieces' distance from the training pieces' encoder states ({found.distance:.3f}), "
                       "each measured in spreads of held-out sentences, added. `python -m explorer grounding` "
                       "gives the same verdict for a file.")
        else:
            st.caption(f"Score {found.score:.2f} nats per word against this model's threshold {found.threshold:.2f} "
                       "(above it reads as guessing, below as grounded; how surprising the sentence is to a word-pair model of the training sources; calibrated "
                       "on held-out pairs). `python -m explorer grounding` gives the same verdict for a file.")


def states_button(ckpt, found: Verdict | str) -> None:
    """For a checkpoint without an encoder-state map: the button that builds it in the background (one
    encoder pass over the training sentences), after which the verdict weighs both signals."""
    if not isinstance(found, Verdict) or found.combined is not None:
        return
    path = states.runs_map_path(dataset_of(ckpt.meta), str(ckpt.meta.get("weights_sha256") or ""))
    job = background.job_for(path)
    if job is None or not job.active:
        st.caption("This verdict weighs the training data's words only: the encoder's view of its training "
                   "sentences makes it sharper (one encoder pass over them, in the background).")
        if st.button("Compute the encoder-state map", key="grounding_states_start"):
            checkpoint, device = str(ckpt.path), models.app_device()

            def work(job: background.Job) -> None:
                from explorer.store.checkpoint import load_checkpoint
                private = load_checkpoint(checkpoint, device=device)
                index = ensure(private.path, private.meta)
                ensure_states(private.path, private.model, private.tokenizer, private.meta, index,
                              RunContext(meta=private.meta, progress=job.progress, cancel=job.cancel))

            index = training_index(ckpt)         # one encoder pass per sentence: the stages' shares of the work
            held = 0 if index is None else int(index.calibration.get("held_out") or 0)
            shares = (index.pairs, held) if held > 0 else ()
            background.start(path, ("training sentences", "held-out sentences"), "Encoder-state map", work,
                             shares=shares)
    job = background.job_for(path)
    st.fragment(background.show_job, run_every=2 if job is not None and job.active else None)(str(path), "states")


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
