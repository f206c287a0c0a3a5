"""AppTest: a shared Beam-search link that names a test verse (verse=) costs a fresh session what the
same link with the verse's text (text=) costs: the page runs once on the verse, and the checkpoint's
opening sentence (which, without a choice recorded in card.json, means a beam search over test pairs)
is never chosen on the way.

Counted, not timed: calls of the opening-sentence rule, of its beam search and of st.rerun, in this
process (AppTest runs the app here). The checkpoint is a copy of the shipped numbers-en-de whose
card.json records no opening sentence, in a folder of its own, so no earlier test's cached choice
(st.cache_data, keyed by the checkpoint's path) can hide a search.
"""
from __future__ import annotations

import json
import shutil

import pytest
import streamlit as st

from explorer.evaluation import showcase
from support.app_support import NUMBERS, no_exception, open_app, texts
from webapp import sentence

PAGE = "webapp/pages/beam.py"
VERSE = 3
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


@pytest.fixture
def unrecorded(tmp_path, monkeypatch):
    """numbers-en-de copied into a root of its own, its card.json without the recorded opening sentence."""
    root = tmp_path / "models"
    copied = shutil.copytree(NUMBERS, root / NUMBERS.name)
    card = json.loads((copied / "card.json").read_text())
    assert card.pop(showcase.CARD_KEY, None) is not None        # the shipped card records it: now it does not
    (copied / "card.json").write_text(json.dumps(card))
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(root))
    monkeypatch.delenv("EXPLORER_MODELS_DIR", raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    return copied


@pytest.fixture
def counted(monkeypatch):
    """{what: calls} of the opening-sentence rule, its beam search and st.rerun, while the test runs."""
    calls = {"opening sentence": 0, "beam search over test pairs": 0, "rerun": 0}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper
    monkeypatch.setattr(sentence, "opening_sentence", counting("opening sentence", sentence.opening_sentence))
    monkeypatch.setattr(showcase, "best_translated", counting("beam search over test pairs", showcase.best_translated))
    monkeypatch.setattr(st, "rerun", counting("rerun", st.rerun))
    return calls


def verse_source(ckpt_path, number: int) -> str:
    from explorer.data.files import read_tsv

    return read_tsv(str(ckpt_path / "test.tsv"))[number - 1].src


def shows_the_verse(at, text: str) -> None:
    no_exception(at)
    assert not at.error, texts(at.error)
    assert at.session_state["text"] == text and at.text_input(key="beam_text").value == text
    assert at.selectbox(key="beam_verse").value == VERSE and at.query_params["verse"] == str(VERSE)
    assert at.text_input(key="beam_reference").value                  # the verse's reference, followed
    assert any(m.label == "Left the beam at step" for m in at.metric)


def test_a_verse_link_costs_what_the_same_text_link_costs(unrecorded, counted):
    text = verse_source(unrecorded, VERSE)
    at = open_app(unrecorded.name, PAGE, query={"verse": VERSE})               # a fresh session: no sentence yet
    shows_the_verse(at, text)
    assert counted == {"opening sentence": 0, "beam search over test pairs": 0, "rerun": 0}

    at = open_app(unrecorded.name, PAGE, query={"text": text})
    shows_the_verse(at, text)
    assert counted == {"opening sentence": 0, "beam search over test pairs": 0, "rerun": 0}

    # the counters see the work when it is done: a link with neither opens on the opening sentence,
    # chosen by a beam search over the test pairs (card.json records no choice here)
    at = open_app(unrecorded.name, PAGE)
    no_exception(at)
    assert counted["opening sentence"] >= 1 and counted["beam search over test pairs"] == 1
    assert at.session_state["text"]


def test_a_verse_link_with_a_text_shows_the_verse(unrecorded, counted):
    """Both keys: the verse is the fact the link shows, as before (then after a second run)."""
    text = verse_source(unrecorded, VERSE)
    at = open_app(unrecorded.name, PAGE, query={"verse": VERSE, "text": "one hundred"})
    shows_the_verse(at, text)
    assert counted == {"opening sentence": 0, "beam search over test pairs": 0, "rerun": 0}


@pytest.mark.parametrize("verse", ["0", "99999", "-2", "two"])
def test_a_link_without_a_usable_verse_opens_as_before(unrecorded, counted, verse):
    """verse=0 (the sentence as typed), one past the test set, or junk: no verse's text is taken; the
    link's text stays (missing_verse warns about one that does not exist)."""
    at = open_app(unrecorded.name, PAGE, query={"verse": verse, "text": "one hundred"})
    no_exception(at)
    assert at.session_state["text"] == "one hundred" and at.selectbox(key="beam_verse").value == 0
    assert counted["beam search over test pairs"] == 0
