"""The sentence every page looks at, shared across pages and kept in the URL, and the checkpoint's
held-out test pairs it is often taken from (the examples offered, the sentence a first visit opens
on, the reference that scores a translation).

Why one module: the sentence is one fact shared by every page (typing it on Attention changes it on
Translate), so reading it, setting it, cutting it to size and warning about it are written once.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import streamlit as st

from explorer.files.names import TEST_SPLIT
from explorer.store.checkpoint import CheckpointError
from explorer.studies.common.source_file import MAX_SENTENCE_CHARS
from webapp import models, presenter, state, url_keys

MAX_CHARS = MAX_SENTENCE_CHARS         # longer input is truncated with a notice (the library's one limit)
URL_CHARS = 1000                      # the sentence kept in the URL (a shared link) is cut here
MAX_EXAMPLES = 300                    # examples offered from a checkpoint's test.tsv


def current_text() -> str:
    """The sentence being looked at; on a fresh session, the one a shared link names (its test verse,
    else its text), else the checkpoint's opening sentence (whichever page the visit starts on)."""
    if "text" not in st.session_state:
        path = st.session_state.get("checkpoint_path")
        raw = linked_verse_text(path) or url_keys.raw(url_keys.TEXT) or opening_sentence(path)
        st.session_state["text"], was_cut = clip_text(raw)
        if was_cut:                                          # require_text() says so while it is shown
            st.session_state["_text_cut"] = (st.session_state["text"], len(raw))
    text = st.session_state["text"]
    url_keys.put(text=text[:URL_CHARS] if text else None)         # the URL always names the sentence shown
    return text


def linked_verse_text(ckpt_path: str | Path | None) -> str | None:
    """The source of the test verse a link names (the Beam page's verse=, 1-based into examples();
    the only page whose URL keeps that key), None when the URL names none or one that does not exist.

    A fresh session opens on it at once, as on a link's text=: it used to open on the opening sentence
    first (choosing it can mean a beam search over test pairs, for a checkpoint whose card.json does
    not record the choice) and then run the page again for the verse (webapp.views.beam_fall, which
    still follows a verse picked or linked later in the session, and warns about one that does not exist).
    """
    asked = url_keys.raw(url_keys.VERSE)
    if not ckpt_path or asked is None or not re.fullmatch(r"\+?[0-9]{1,6}", asked.strip()):
        return None
    number, found = int(asked.strip()), examples(ckpt_path)
    return found[number - 1][1] if 1 <= number <= len(found) else None


def opening_sentence(ckpt_path: str | Path | None) -> str:
    """The test sentence a first visit opens on (showcase_example), "" without a test set or a
    checkpoint that loads."""
    found = examples(ckpt_path) if ckpt_path else []
    if not found:
        return ""
    try:
        sha = models.load(ckpt_path).sha256
    except CheckpointError:                                  # the page's own load says why
        return ""
    index = showcase_example(ckpt_path, sha)
    return found[index if index is not None else 0][1]


def follow_checkpoint(old, new) -> None:
    """Another checkpoint was picked (old, new: CheckpointInfo; the sidebar calls this). When the
    sentence is one the app took from the old model's test set and the new model reads another
    language, the new model's opening sentence replaces it (a Spanish verse is no input for
    an English-reading model, and nobody typed it). A sentence the user typed, or one the new model
    reads too, stays: comparing two models on one sentence is what switching is often for."""
    text = st.session_state.get("text")
    old_lang, new_lang = old.meta.get("src_lang"), new.meta.get("src_lang")
    if not text or new.error or (old_lang and old_lang == new_lang):
        return
    if reference_for(old.path, text) is None or reference_for(new.path, text) is not None:
        return                                           # typed by the user, or the new model's own
    opening = opening_sentence(new.path)
    if opening:
        set_text(opening)


def set_text(text: str) -> None:
    st.session_state["text"] = text
    url_keys.put(text=text[:URL_CHARS] if text else None)


def sentence_box(key: str, label: str, widget: Callable = st.text_area, **kwargs) -> str:
    """A text box (`widget`: st.text_area or st.text_input) bound to the shared sentence: shows
    current_text(), and typing sets it.

    The sentence is handed to the browser on every run, not only when it differs from the box's
    value: a run that ends in st.stop() before the box is drawn (a checkpoint that fails to load)
    skips Streamlit's end-of-run bookkeeping, so its copy of the box keeps the old value while the
    browser drops the box; drawn again, the browser would show it empty and send that back.
    """
    url_keys.hold(key, current_text())
    widget(label, key=key, on_change=lambda: set_text(st.session_state[key]), **kwargs)
    return current_text()


def clip_text(text: str) -> tuple[str, bool]:
    """Cut text to MAX_CHARS; returns (text, was_cut)."""
    return (text[:MAX_CHARS], True) if len(text) > MAX_CHARS else (text, False)


def require_text(text: str, empty_hint: str, verb: str = "used") -> str:
    """The text a page works on: stop with `empty_hint` if blank; cut to MAX_CHARS with a notice."""
    if not text.strip():
        st.info(empty_hint)
        st.stop()
    return cut_with_notice(text, verb)


def cut_with_notice(text: str, verb: str = "used") -> str:
    """`text` cut to MAX_CHARS, with a notice when it was: cut here, or cut as a link's longer text was
    read (current_text), which only the notice still tells."""
    clipped, was_cut = clip_text(text)
    cut_from_url = st.session_state.get("_text_cut", ("", 0))
    length = len(text) if was_cut else cut_from_url[1] if cut_from_url[0] == text else 0
    if length:
        st.warning(f"The text is {length:,} characters long; only the first {MAX_CHARS:,} are {verb}.")
    return clipped


@st.cache_data(max_entries=16, show_spinner="Choosing a test sentence this model translates well…")
def _showcase(ckpt_path: str, sha: str, mtime: float) -> int | None:
    from explorer.evaluation.showcase import best_translated

    ckpt = models.load(ckpt_path)
    found = best_translated(ckpt.model, ckpt.tokenizer, [(src, tgt) for _, src, tgt in examples(ckpt_path)])
    return found.index if found is not None else None


def showcase_example(ckpt_path: str | Path, sha: str) -> int | None:
    """The index in examples() of the test pair a first visit opens on (explorer.evaluation.showcase's
    rule: the best beam-5 sentence chrF among the first pairs with a reference), computed once per
    checkpoint; None without a test set. Read from card.json when it records the rule's choice for
    these weights and pairs (shipped checkpoints do): the ~1 s beam search then no longer delays
    the first visitor's controls."""
    try:
        mtime = (Path(ckpt_path) / TEST_SPLIT).stat().st_mtime
    except OSError:
        return None
    from explorer.evaluation.showcase import from_card

    try:
        recorded, index = from_card(models.load(ckpt_path).card, [(src, tgt) for _, src, tgt in examples(ckpt_path)], sha)
    except Exception:  # noqa: BLE001 - a checkpoint that fails to load: the page's own load says why
        recorded, index = False, None
    if recorded:
        return index
    try:
        return _showcase(str(ckpt_path), sha, mtime)
    except (ValueError, RuntimeError):          # a model that cannot decode: the page's own call says why
        return None


@st.cache_data(max_entries=16, show_spinner=False)
def _examples(ckpt_path: str, mtime: float) -> list[tuple[str, str, str]]:
    from explorer.data.files import read_tsv
    from explorer.data.types import DataError

    try:
        pairs = read_tsv(str(Path(ckpt_path) / TEST_SPLIT), max_bytes=50 * 1024 * 1024)
    except DataError:
        return []
    return [(p.ref, p.src, p.tgt) for p in pairs[:MAX_EXAMPLES]]


def examples(ckpt_path: str | Path) -> list[tuple[str, str, str]]:
    """(ref, source, reference translation) from the checkpoint's held-out test.tsv; [] if none."""
    path = Path(ckpt_path) / TEST_SPLIT
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return []
    return _examples(str(ckpt_path), mtime)


def linked_reference() -> str | None:
    """A reference translation a link just brought (ref=, cut to URL_CHARS), or None."""
    text = url_keys.linked(url_keys.REF)
    return None if text is None else text[:URL_CHARS]


def put_reference(typed: str, known: str | None) -> None:
    """A reference typed for the sentence into the URL (ref=), so a shared link scores and follows the same
    one; none when it is empty or the test set's own (`known`), which the sentence brings back by itself."""
    typed = typed.strip()
    url_keys.put(ref=typed[:URL_CHARS] if typed and typed != (known or "").strip() else None)


def current_reference(ckpt_path: str | Path, text: str) -> str | None:
    """The reference for `text`: the test set's, else one the user typed for this same sentence."""
    found = reference_for(ckpt_path, text)
    if found:
        return found
    typed_for, typed = st.session_state.get("typed_reference", ("", ""))
    return typed.strip() or None if typed_for == text else None


def reference_for(ckpt_path: str | Path, text: str) -> str | None:
    """The reference translation when `text` is one of the checkpoint's test sentences."""
    wanted = text.strip()
    for _, src, tgt in examples(ckpt_path):
        if src.strip() == wanted:
            return tgt
    return None


def warn_unknown(tokenizer, text: str) -> None:
    """Say which parts of `text` the model's vocabulary lacks (read as the unknown token), on every
    page that translates: a Spanish sentence given to the English-reading numbers model otherwise
    comes back as confident German numbers with no hint why."""
    unknown = tokenizer.unknown(text) if hasattr(tokenizer, "unknown") else []
    if unknown:
        shown = ", ".join(f"“{state.md_escape(u)}”" for u in unknown[:10]) + (" …" if len(unknown) > 10 else "")
        st.warning(f"{len(unknown)} part(s) of the sentence are not in this model's vocabulary and were read as "
                   f"the unknown token: {shown}. The translation cannot use them.")


def notices(tokenizer, result, text: str) -> None:
    """What every translating page says above its result: the sentence was cut to what the model reads
    (result.truncated, with the reason), and which parts of it the model cannot read (warn_unknown)."""
    if result.truncated:
        st.warning(f"The sentence is longer than this model can read: {state.md_escape(result.reason)}.")
    warn_unknown(tokenizer, text)


def translated(ckpt, text: str, cfg: dict, *, what: str = "The translation", **kwargs):
    """The preamble of a page that shows a translation: translate on the shared model (models.translate,
    queued and cached), the notices, and None (after saying why) when there is nothing to show, so the
    page stops or returns; else the Translation."""
    result = state.friendly(models.translate, ckpt, text, cfg, what=what, **kwargs)
    if result is None:
        return None
    notices(ckpt.tokenizer, result, text)
    if not result.hypotheses:
        st.info(f"Nothing to show: {state.md_escape(result.reason or 'the text produced no tokens')}.")
        return None
    return result


def page_translation(ckpt, key: str, cfg: dict, purpose: str):
    """The top of a page that explores one sentence's translation: its sentence box (one line on a
    projector, so the page's result stays on the first screen), the text cut to what the model reads,
    and the translation in one line; the page stops, saying why, when there is nothing to show.
    `purpose` ends the empty box's hint ("to see its attention."). Returns (text, clipped, result)."""
    box = dict(widget=st.text_input) if presenter.on() else dict(height=68)
    text = sentence_box(key, "Sentence", placeholder="Type a sentence, or pick one on the Translate page.", **box)
    clipped = require_text(text, f"Type a sentence above (or pick an example on the Translate page) {purpose}", "used")
    result = translated(ckpt, clipped, cfg)
    if result is None:
        st.stop()
    st.markdown("**Translation** (" + cfg["strategy"] + "): " + state.md_escape(result.text or "(empty)"))
    return text, clipped, result
