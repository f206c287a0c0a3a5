"""The Beam search page's reference: pick one of the checkpoint's held-out test verses (its source becomes
the page's sentence, its translation the reference) or type a reference, and see where the reference
left the beam, its rank there, its score against the winner's, and whether the search or the model is
to blame (Stahlberg & Byrne 2019; explorer.studies.contrastive.fall through webapp.analyses.reference_fall, which
follows the reference through the page's own cached search).

The verse is in the URL (1-based; 0: the sentence as typed), but the sentence is the fact the page shows:
a typed sentence that is no test verse sets the picker back to 0, and a link's verse sets the sentence.
A link's verse that does not exist (past the last test verse, or below 0) sets nothing: the link's
sentence stays, a warning says so, and the verse leaves the URL. A fresh session (a shared link) opens
on the link's verse at once (sentence.current_text: sentence.linked_verse_text), so the page runs once,
as for the same link with the verse's text; a verse linked into a session already under way is set
here, and the page runs again.
"""
from __future__ import annotations

import re

import streamlit as st

from webapp import analyses, sentence, state
from webapp import url_keys as url
from webapp.text_safety import shortened

VERSE, REFERENCE = "beam_verse", "beam_reference"
TYPED = "(the sentence above, as typed)"


def _verse_of(verses, text: str) -> int:
    """The 1-based test verse whose source is `text`, 0 if none."""
    wanted = text.strip()
    return next((i for i, (_, src, _) in enumerate(verses, 1) if src.strip() == wanted), 0)


def verse_picker(ckpt, text: str) -> str:
    """The test-verse select box under the sentence; returns the sentence to translate (a link's verse
    replaces it, and the page runs again so the sentence box shows it)."""
    verses = sentence.examples(ckpt.path)
    if not verses:
        return text
    if st.session_state.get(VERSE) != _verse_of(verses, text):        # the sentence is the fact shown
        st.session_state["_" + VERSE] = url.hold(VERSE, _verse_of(verses, text))
    missing_verse(len(verses))
    picked = url.seed(url.VERSE, VERSE, 0, high=len(verses))
    if picked and verses[picked - 1][1].strip() != text.strip():      # a link's verse: its sentence is shown
        sentence.set_text(verses[picked - 1][1])
        url.write(url.VERSE, VERSE, picked)
        st.rerun()

    def picked_verse() -> None:
        chosen = st.session_state[VERSE]
        if chosen:
            sentence.set_text(verses[chosen - 1][1])

    st.selectbox("…or pick a test verse (held out from training), to follow its reference through the search",
                 range(len(verses) + 1), key=VERSE, on_change=picked_verse,
                 format_func=lambda i: TYPED if i == 0 else f"{i}. {verses[i - 1][0]}: {verses[i - 1][1][:80]}")
    url.write(url.VERSE, VERSE, st.session_state[VERSE] or None)
    return text


def missing_verse(n_verses: int) -> None:
    """A link's verse number that is no test verse: say so and drop it from the URL, so the sentence
    the link carries (or the one already shown) stays in charge, rather than the nearest verse's."""
    asked = url.linked(url.VERSE)
    if asked is None:
        return
    if not re.fullmatch(r"[+-]?[0-9]+", asked.strip()):
        return                          # not a whole number: seed() falls back to the sentence's own verse
    try:
        number = url.integer(asked.strip())
    except ValueError:                  # more digits than Python reads: no verse either
        number = None
    if number is not None and 0 <= number <= n_verses:
        return
    st.warning(f"The link asks for test verse {state.md_escape(shortened(asked.strip(), 12))}, which does not "
               f"exist: this checkpoint has "
               f"{n_verses:,} test verses. The sentence is shown as the link gives it.")
    url.put(**{url.VERSE.key: None})


def reference_box(ckpt, text: str) -> str:
    """The reference to follow: the test verse's translation, else one typed here (or on Translate)."""
    known = sentence.current_reference(ckpt.path, text) or ""
    linked = sentence.linked_reference()
    if linked is not None:                                            # a link's (shared with the sentence)
        st.session_state["_beam_reference_for"] = text
        url.hold(REFERENCE, linked)
    elif st.session_state.get("_beam_reference_for") != text:         # another sentence: its own reference
        st.session_state["_beam_reference_for"] = text
        url.hold(REFERENCE, known)
    else:
        url.hold(REFERENCE, st.session_state.get(REFERENCE, known))
    typed = st.text_input("Reference translation to follow through the search", key=REFERENCE,
                          help="The test verse's reference when the sentence is one; type your own otherwise.")
    sentence.put_reference(typed, sentence.reference_for(ckpt.path, text))
    clipped, cut = sentence.clip_text(typed)
    if cut:
        st.warning(f"The reference is longer than {sentence.MAX_CHARS} characters: only the start is followed.")
    return clipped


def fall_section(ckpt, text: str, cfg: dict, piece) -> None:
    """Where the reference left the beam, in numbers and in words."""
    st.subheader("Where the reference fell off the beam")
    reference = reference_box(ckpt, text)
    if not reference.strip():
        st.info("Pick a test verse above, or type a reference translation, to see where it left the beam.")
        return
    fall = state.friendly(analyses.reference_fall, ckpt, text, cfg, reference, what="Following the reference")
    if fall is None:
        return
    cols = st.columns(4)
    cols[0].metric("Left the beam at step", "never" if fall.step is None else fall.step + 1)
    cols[1].metric("Its rank there", "—" if fall.rank is None else fall.rank,
                   help=f"1 = the step's best extension; the beam keeps {fall.beam_size}")
    # The difference stands under the reference, as the reference's: under the output, "-0.66" with a down
    # arrow read as the output scoring lower when it scored 0.66 higher.
    cols[2].metric("Reference score", f"{fall.reference_normalized:.2f}",
                   delta=f"{fall.reference_normalized - fall.output_normalized:+.2f} vs the output", delta_color="off",
                   help="Its log-probability under the model, divided by the length penalty: the search's objective; "
                        "below it, how far above (+) or below (-) the output's score it is")
    cols[3].metric("Output score", f"{fall.output_normalized:.2f}", help="The winner's score, the same way")
    verdict = {"search error": st.error, "model error": st.warning}.get(fall.verdict, st.success)
    verdict(verdict_text(fall, piece))
    if fall.step is not None:
        st.button(f"Show step {fall.step + 1} above", key="beam_fall_go", on_click=_go_to, args=(fall.step,),
                  help="Moves the step slider to where the reference left the beam.")


# Said after the verdict's own words (explorer.studies.contrastive.fall), which already name who is to blame:
# this adds what to do about it, not the blame again.
EXPLAIN = {
    "search error": " A wider beam, or exact search, could find it.",
    "model error": " A wider beam would not help: any better search returns an output the model scores at "
                   "least as high; only a better model would prefer the reference.",
}


def verdict_text(fall, piece) -> str:
    """The verdict in words (the library's), then what it means for the search (EXPLAIN), as markdown."""
    words = fall.text(piece)
    return state.md_escape(words[0].upper() + words[1:]) + "." + EXPLAIN.get(fall.verdict, "")


def _go_to(step: int) -> None:
    st.session_state["beam_step"] = step + 1
