"""Where did it learn this? One word of the sentence or of its translation, in the model's training data:
how many training pairs have it, the pairs themselves with the word and its partner found (the output
word the source word brings along, or the source word that brings the output word along: links.py),
for an output word, the training pairs that most raised its probability (explorer.studies.grounding.
influence), and the word's nearest training contexts: the training pieces whose states lie nearest its
own (explorer.studies.grounding.lookup; the encoder's for a source word, from the shipped map; the
decoder's for an output word). On Translate and Beam search; the word is in the URL (`learn`), the lists
are CSV.

The training pairs are read once per dataset (st.cache_resource: the Bible's 28,627 verses, 38 MB
with their lowercased text); an output word's attribution and contexts need the checkpoint's training
pass (its gradient store and decoder-state map), built once in the background and kept beside the runs;
attribution queries run on a private copy of the model, one at a time (the gradient hooks must not see
another user's decoding).
"""
from __future__ import annotations

import threading

import pandas as pd
import streamlit as st

from explorer.data import DataError
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.grounding import influence, states
from explorer.studies.grounding.build import dataset_of, ensure_output_states, ensure_store, kept_states_and_why
from explorer.studies.common.training_data import PairsUnusable
from explorer.studies.grounding.concordance import Concordance, WordPairs
from explorer.studies.grounding.gradients import watched_linears
from explorer.studies.grounding.lookup import nearest_contexts
from explorer.studies.grounding.verdict import Verdict
from webapp import analyses, background, downloads, models
from webapp import url_keys as url
from webapp.text_safety import md_escape
from webapp.views import grounding

SHOWN = 10                         # pairs shown on the page (the CSV has the concordance's 20, or the top 20)
MARK = grounding.MARK


@st.cache_resource(max_entries=3, show_spinner=False)
def _word_pairs(dataset: str) -> WordPairs:
    return WordPairs(analyses.training_split(dataset))         # the pairs themselves shared with other pages


@st.cache_resource(max_entries=2, show_spinner=False)
def _private(path: str, sha: str):
    """A private copy of the checkpoint for attribution queries, with the lock that keeps them one at a time."""
    return load_checkpoint(path, device="cpu"), threading.Lock()


@st.cache_resource(max_entries=2, show_spinner="Reading the gradient store…")
def _store(path: str, mtime: float, dataset: str, sha: str, pairs: int, layers: tuple) -> influence.GradientStore:
    return influence.load(influence.store_path(dataset, sha), dataset, sha, pairs, layers)


@st.cache_resource(max_entries=2, show_spinner=False)
def _output_map(path: str, mtime: float, _model, _meta: dict, pairs: int) -> tuple[states.StateMap | None, str]:
    """(the decoder-state map, "") or (None, why the kept one cannot be used)."""
    return kept_states_and_why(_model, _meta, pairs, "output")


def choices(found: Verdict) -> dict[str, tuple[str, str]]:
    """{URL text: (side, word)}: the translation's words first (what the audience asks about), then the
    sentence's."""
    out = {f"out.{w.word}": ("output", w.word) for w in found.output}
    out.update({f"src.{w.word}": ("source", w.word) for w in found.words})
    return out


def _default(found: Verdict) -> str | None:
    made_up = next((w.word for w in found.output if w.marked), None)
    linked = next((w.word for w in found.output if w.source), None)
    word = made_up or linked
    return f"out.{word}" if word else None


def highlighted(text: str, *targets: str | None) -> str:
    """`text` as Markdown shown as written, its words equal (as words()) to a target on an orange ground."""
    return grounding.marked_markdown(text, {t for t in targets if t})


def _partner(found: Verdict, side: str, word: str) -> str | None:
    if side == "output":
        return next((w.source for w in found.output if w.word == word and w.source), None)
    return next((w.word for w in found.output if w.source == word), None)


def _rows_frame(rows, **more) -> pd.DataFrame:
    return pd.DataFrame([{"training pair": r.index + 1, "ref": r.ref, "source": r.src, "target": r.tgt,
                          **{k: v[i] for k, v in more.items()}} for i, r in enumerate(rows)])


def _concordance_text(found: Concordance, total: int) -> str:
    side = "sentences" if found.side == "source" else "translations"
    head = f"**{md_escape(found.word)}** is in the {side} of {found.pairs:,} of the {total:,} training pairs"
    if not found.pairs:
        return head + ": the model never saw it there."
    if found.partner:
        other = "translation" if found.side == "source" else "sentence"
        return head + (f"; {found.together:,} of them have **{md_escape(found.partner)}** in the {other} "
                       "(the word this translation pairs it with). The first of those:")
    return head + ". The first of them:"


def section(ckpt, source: str, best, found: Verdict | str, key: str) -> None:
    """The section, for the translation `best` (a TranslatedHypothesis) of `source`."""
    st.markdown("#### Where did it learn this?")
    if not isinstance(found, Verdict):
        st.caption(f"No training data to look in: {md_escape(found)}.")
        return
    options = choices(found)
    if not options:
        st.caption("The sentence has no words to look up.")
        return
    widget = f"{key}_learn"
    url.seed(url.LEARN, widget, None, options=options)
    choice = st.selectbox("A word of the translation or of the sentence", list(options.values()), key=widget,
                          placeholder="Pick a word…",
                          format_func=lambda o: f"{o[1]}  ({'translation' if o[0] == 'output' else 'sentence'})")
    url.write(url.LEARN, widget, choice, options=options, default=None)
    if choice is None:                  # nothing is read until a word is picked: a first visit does not wait
        hint = _default(found)
        st.caption("Its training verses, the training pairs that raised it, its nearest training contexts"
                   + (f"; try **{md_escape(options[hint][1])}**." if hint else "."))
        return
    side, word = choice
    dataset = dataset_of(ckpt.meta)
    try:
        pairs = _word_pairs(dataset)
    except (DataError, PairsUnusable) as err:
        st.caption(f"The training pairs of this model cannot be read here: {md_escape(err)}.")
        return
    found_c = pairs.concordance(word, side, _partner(found, side, word))
    st.markdown(_concordance_text(found_c, len(pairs.pairs)))
    for row in found_c.rows[:SHOWN]:
        st.markdown(f"- *{md_escape(row.ref)}* · {highlighted(row.src, word if side == 'source' else found_c.partner)}"
                    f" → {highlighted(row.tgt, word if side == 'output' else found_c.partner)}")
    if found_c.rows:
        downloads.table_csv_button(_rows_frame(found_c.rows), downloads.file_stem(ckpt.name, "concordance", word),
                                   key=f"{key}_concordance_csv", label="These training pairs as CSV")
    if side == "output":
        store, omap = _training_pass(ckpt, pairs, key)
        if store is not None:
            _raised(ckpt, source, best, word, pairs, store, key)
        if omap is not None:
            _nearest(ckpt, source, word, pairs, omap, key, best.ids)
    else:
        smap = grounding.state_map(ckpt, len(pairs.pairs))
        if smap is not None:
            _nearest(ckpt, source, word, pairs, smap, key)


def _nearest(ckpt, source: str, word: str, pairs: WordPairs, smap: states.StateMap, key: str,
             out_ids=None) -> None:
    """A word's nearest training contexts (lookup.nearest_contexts), listed with the word found there."""
    near = nearest_contexts(ckpt.model, ckpt.tokenizer, smap, pairs.pairs, source, word, out_ids, k=SHOWN)
    if not near:
        return
    view = "encoder" if smap.side == "source" else "decoder"
    st.markdown(f"**Nearest training contexts of '{md_escape(word)}'** (the {view}'s view)")
    st.caption(f"The training pieces, among {len(smap.states):,} kept from the training pairs, whose {view} state "
               "lies nearest this word's first piece (cosine): where the model has " +
               ("read something like it." if smap.side == "source" else "been in a state like this one as it wrote."))
    rows = []
    for c in near:
        p = pairs.pairs[c.pair]
        rows.append({"training pair": c.pair + 1, "ref": p.ref, "source": p.src, "target": p.tgt, "word": c.word,
                     "cosine": round(c.cosine, 4)})
        shown = highlighted(p.src, c.word) if smap.side == "source" else f"{md_escape(p.src)} → {highlighted(p.tgt, c.word)}"
        st.markdown(f"- {c.cosine:.3f} · *{md_escape(p.ref)}* · {shown}")
    downloads.table_csv_button(pd.DataFrame(rows), downloads.file_stem(ckpt.name, "nearest", word),
                               key=f"{key}_nearest_{smap.side}_csv", label="These contexts as CSV")


def _training_pass(ckpt, pairs: WordPairs, key: str):
    """The checkpoint's gradient store and decoder-state map, each None while it is not built; when either
    is missing, one button builds what is missing in the background (one job)."""
    dataset, sha = dataset_of(ckpt.meta), str(ckpt.meta.get("weights_sha256") or "")
    path = influence.store_path(dataset, sha)
    layers = tuple(name for name, _ in watched_linears(ckpt.model))
    store = omap = None
    if path.is_file():
        try:
            store = _store(str(path), path.stat().st_mtime, dataset, sha, len(pairs.pairs), layers)
        except influence.StoreUnusable as err:
            st.caption(f"The kept gradient store cannot be used ({md_escape(err)}); build it again below.")
    out_path = states.runs_map_path(dataset, sha, "output")
    if out_path.is_file():
        omap, why = _output_map(str(out_path), out_path.stat().st_mtime, ckpt.model, ckpt.meta, len(pairs.pairs))
        if why:
            st.caption(f"The kept decoder-state map cannot be used ({md_escape(why)}); build it again below.")
    if store is None or omap is None:
        st.caption(f"The training pairs that raised an output word, and its nearest training contexts, need one pass "
                   f"over the {len(pairs.pairs):,} training pairs in the background (about half a training epoch), "
                   "kept for these weights.")
        _build_button(ckpt, path, key)
    return store, omap


def _raised(ckpt, source: str, best, word: str, pairs: WordPairs, store: influence.GradientStore, key: str) -> None:
    st.markdown(f"**The training pairs that most raised '{md_escape(word)}'** (training-data attribution)")
    positions = influence.word_positions(best.pieces, word)
    if not positions:
        st.caption("That word is not among the translation's pieces.")
        return
    model, lock = _private(str(ckpt.path), ckpt.sha256)
    with lock:
        top = influence.top(store, influence.query(model.model, model.tokenizer, source, best.ids, positions))
    st.caption("Each training pair's gradient against this word's (Grad-Cos: the cosine of the two; above 0, a "
               "training step on that pair raised the word's probability here). `python -m explorer poison` shows "
               "it finding twenty planted pairs.")
    rows = [pairs.pairs[t.index] for t in top]
    for t, p in list(zip(top, rows))[:SHOWN]:
        st.markdown(f"- {t.score:+.3f} · *{md_escape(p.ref)}* · {md_escape(p.src)} → {highlighted(p.tgt, word)}")
    frame = pd.DataFrame([{"rank": k + 1, "training pair": t.index + 1, "ref": p.ref, "source": p.src,
                           "target": p.tgt, "grad_cos": round(t.score, 5)} for k, (t, p) in enumerate(zip(top, rows))])
    downloads.table_csv_button(frame, downloads.file_stem(ckpt.name, "attribution", word),
                               key=f"{key}_raised_csv", label="The top 20 as CSV")


def _build_button(ckpt, path, key: str) -> None:
    job = background.job_for(path)
    if (job is None or not job.active) and st.button("Compute the training pass", key=f"{key}_store_start"):
        checkpoint, device = str(ckpt.path), models.app_device()

        def work(job: background.Job) -> None:
            private = load_checkpoint(checkpoint, device=device)
            context = RunContext(meta=private.meta, progress=job.progress, cancel=job.cancel)
            ensure_store(private.model, private.tokenizer, private.meta, context)
            ensure_output_states(private.model, private.tokenizer, private.meta, context)

        background.start(path, ("training pairs", "training sentences"), "Training pass", work)
    job = background.job_for(path)
    st.fragment(background.show_job, run_every=2 if job is not None and job.active else None)(str(path), f"{key}_store")

