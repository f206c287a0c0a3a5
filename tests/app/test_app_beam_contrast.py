"""AppTest of the Beam search page's contrast and reference views, on the shipped bible-es-en: a foil picked
from the step's candidates gives the contrastive attribution beside the plain one (with integrated
gradients' completeness); hostile foils give messages; a click on a tree node picks what the contrast
explains; a test verse's reference is followed through the search, agreeing with the library run on its
own; absurd URL values are clamped and written back.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.app_support import ROOT, array, chart, default_roots, no_exception, open_app, texts  # noqa: F401

PAGE = "webapp/pages/beam.py"
BIBLE = ROOT / "checkpoints" / "bible-es-en"
GENESIS = "En el principio creó Dios los cielos y la tierra."
pytestmark = [pytest.mark.usefixtures("default_roots"),
              pytest.mark.skipif(not (BIBLE / "model.safetensors").is_file(), reason="needs checkpoints/bible-es-en")]


def open_page(**query):
    return open_app("bible-es-en", PAGE, GENESIS, {k: str(v) for k, v in query.items()})


def foil_box(at):
    return next(s for s in at.selectbox if s.key.startswith("beam_foil_"))


def bars(at) -> dict[str, np.ndarray]:
    return {t["name"]: array(t["y"]) for t in chart(at, "beam_contrast_chart")["data"] if t.get("type") == "bar"}


def test_a_picked_foil_shows_the_contrast_beside_the_plain_attribution():
    import re

    at = open_page(contrast=1)
    no_exception(at)
    assert not at.error and not at.warning, texts(at.error) + texts(at.warning)
    foil = foil_box(at)
    assert len(foil.options) >= 2                                           # the step's other candidates
    drawn = bars(at)
    contrast = next(v for k, v in drawn.items() if k.startswith("contrast"))
    plain = next(v for k, v in drawn.items() if k.startswith("plain"))
    ticks = chart(at, "beam_contrast_chart")["layout"]["xaxis"]["ticktext"]
    assert len(contrast) == len(plain) == len(ticks)
    assert [t.split(":")[0] for t in ticks[-1:]] == ["out 1"]              # step 1: the decoder read only <s>
    assert all(t.startswith("src ") for t in ticks[:-1])
    assert not np.allclose(contrast, plain)                                # the contrast is not the plain map
    words = texts(at.markdown).replace("\\", "")
    assert "Completeness" in words and "integrated gradients at 32 points" in words
    # the foil's log-prob stated is the one the search recorded (the list's label)
    listed = float(re.search(r"log p (-?[0-9.]+)", foil.options[0]).group(1))
    stated = float(re.search(r"rather than \*\*[^*]+\*\* \(log p (-?[0-9.]+)\)", words).group(1))
    assert round(stated, 2) == listed
    # another foil, another contrast; gradient x input, another map
    foil.select_index(1).run()
    no_exception(at)
    other = next(v for k, v in bars(at).items() if k.startswith("contrast"))
    assert not np.allclose(other, contrast)
    at.radio(key="beam_contrast_method").set_value("grad-x-input").run()
    no_exception(at)
    assert "first-order" in texts(at.markdown)
    assert at.query_params["method"] == "grad-x-input" and at.query_params["foil"] == "2"


@pytest.mark.parametrize("word, says", [
    ("   ", "empty"),
    ("§§", "does not know"),
    ("two words", "one word"),
    ("x" * 80, "at most 60"),
    ("In", "chosen token"),
])
def test_hostile_foils_get_messages(word, says):
    at = open_page(contrast=1)
    at.text_input(key="beam_foil_word").input(word).run()
    no_exception(at)
    assert not at.error, texts(at.error)
    assert says in texts(at.warning).replace("\\", ""), texts(at.warning)
    assert not any(c.proto.id.endswith("-beam_contrast_chart") for c in at.get("plotly_chart"))


def test_a_word_of_many_pieces_is_contrasted_through_its_first_and_says_so():
    at = open_page(contrast=1)
    at.text_input(key="beam_foil_word").input("antidisestablishmentarianism").run()
    no_exception(at)
    note = texts(at.info).replace("\\", "")
    assert "pieces" in note and "the contrast is with its first" in note
    assert bars(at)                                                         # and the contrast is drawn
    assert at.query_params["vs"] == "antidisestablishmentarianism"


def test_a_click_on_a_pruned_node_makes_it_the_foil_of_its_best_sibling():
    """What the tree's click handler decides (beam_contrast.picked_from_tree), on the page's own search."""
    from explorer.config import DecodeConfig
    from explorer.decoding.beam_trace import PRUNED
    from explorer.decoding.translate import translate
    from explorer.store.checkpoint import load_checkpoint
    from webapp.views.beam_contrast import picked_from_tree

    ckpt = load_checkpoint(BIBLE)
    trace = translate(ckpt.model, ckpt.tokenizer, GENESIS, DecodeConfig(beam_size=5), trace=True).beam_trace
    cand, best = trace.candidates, trace.best_path()
    step = 3
    on_path = best[step]
    pruned = [int(r) for r in trace.step_rows(step) if cand["status"][r] == PRUNED
              and cand["parent"][r] == cand["parent"][on_path]]
    assert pruned, "the best hypothesis's parent should have a pruned extension at step 4"
    chosen, foil = picked_from_tree(trace, pruned[0])
    assert chosen == on_path and foil == int(cand["token"][pruned[0]])
    assert picked_from_tree(trace, on_path) == (on_path, None)             # a best-path node explains itself


def test_a_test_verse_shows_where_its_reference_left_the_beam():
    from explorer.config import DecodeConfig
    from explorer.studies.contrastive.fall import reference_fall
    from explorer.decoding.translate import translate
    from explorer.store.checkpoint import load_checkpoint
    from explorer.text.encoding import output_ids

    at = open_page()
    at.selectbox(key="beam_verse").set_value(1).run()
    no_exception(at)
    assert at.query_params["verse"] == "1"
    source, reference = at.session_state["text"], at.text_input(key="beam_reference").value
    assert source != GENESIS and reference
    metrics = {m.label: m.value for m in at.metric}
    verdict = texts(at.warning) + texts(at.error) + texts(at.success)
    assert ("Model error" in verdict) or ("Search error" in verdict) or ("output is the reference" in verdict)
    # the library, run on its own with the page's settings, finds the same step, rank and verdict
    ckpt = load_checkpoint(BIBLE)
    cfg = DecodeConfig(beam_size=5, length_penalty="gnmt", alpha=0.6)
    out = translate(ckpt.model, ckpt.tokenizer, source, cfg)
    fall = reference_fall(ckpt.model, out.src_ids, output_ids(ckpt.tokenizer, reference, 512, ckpt.model.cfg.special), cfg)
    assert metrics["Left the beam at step"] == ("never" if fall.step is None else str(fall.step + 1))
    assert metrics["Its rank there"] == ("—" if fall.rank is None else str(fall.rank))
    # the difference stands under the reference, signed as the reference's (under the output it read backwards)
    deltas = {m.label: m.proto.delta for m in at.metric}
    assert deltas["Reference score"] == f"{fall.reference_normalized - fall.output_normalized:+.2f} vs the output"
    assert not deltas["Output score"]
    assert fall.verdict.capitalize() in verdict or fall.verdict == "no error"
    if fall.step is not None:                                               # the button shows that step
        at.button(key="beam_fall_go").click().run()
        assert at.slider(key="beam_step").value == fall.step + 1 and at.query_params["step"] == str(fall.step + 1)
    # a typed sentence that is no test verse sets the picker back; an empty reference asks for one
    at.text_input(key="beam_text").input(GENESIS).run()
    assert at.selectbox(key="beam_verse").value == 0 and "verse" not in at.query_params
    at.text_input(key="beam_reference").input("").run()
    assert "type a reference" in texts(at.info)
    assert "ref" not in at.query_params                                     # the verse's own reference is not either


def test_a_typed_reference_is_in_the_link_and_followed_again_from_it():
    at = open_page()
    at.text_input(key="beam_reference").input("In the beginning God made the heavens").run()
    no_exception(at)
    assert at.query_params["ref"] == "In the beginning God made the heavens"
    metrics = {m.label: m.value for m in at.metric}
    assert "Left the beam at step" in metrics
    again = open_app("bible-es-en", PAGE, query=dict(at.query_params))
    no_exception(again)
    assert again.text_input(key="beam_reference").value == at.query_params["ref"]
    assert {m.label: m.value for m in again.metric} == metrics


def test_absurd_url_values_are_clamped_and_written_back():
    at = open_page(contrast=1, foil=99999, ig=-3, method="saliency", verse=-7)
    no_exception(at)
    assert not at.error, texts(at.error)
    foil = foil_box(at)
    assert at.query_params["foil"] == str(len(foil.options))               # the last foil offered
    assert at.query_params["ig"] == "16" and at.session_state["beam_ig_points"] == 16
    assert at.query_params["method"] == "integrated-gradients"
    assert "verse" not in at.query_params and at.session_state["text"] == GENESIS



def test_with_the_contrast_off_the_link_keeps_none_of_its_controls_values():
    """Its foil, word, method and IG points are not drawn while the contrast is off: a link kept
    `method=abc&ig=abc&foil=-5` (the address bar carries only what the page shows)."""
    at = open_page(contrast=0, foil=-5, ig="abc", method="abc", vs="luz")
    no_exception(at)
    at.run()
    assert not {"foil", "ig", "method", "vs"} & set(at.query_params), dict(at.query_params)
    assert not at.toggle(key="beam_contrast").value


@pytest.mark.parametrize("verse", ["99999", str(10 ** 9), "-7", "9" * 5000])
def test_a_verse_that_does_not_exist_leaves_the_links_sentence_in_charge(verse):
    """verse= past the last test verse (or below 0) is not the nearest verse: the link's text= stays the
    sentence, a warning says the verse does not exist, and the verse leaves the URL."""
    at = open_page(verse=verse)
    no_exception(at)
    assert at.session_state["text"] == GENESIS and at.text_input(key="beam_text").value == GENESIS
    assert "verse" not in at.query_params and at.selectbox(key="beam_verse").value == 0
    warned = texts(at.warning)
    assert "does not exist" in warned and len(warned) < 2000, warned
    assert not at.error, texts(at.error)


def test_a_verse_that_exists_still_sets_the_sentence():
    at = open_page(verse=2)
    no_exception(at)
    assert at.session_state["text"] != GENESIS and at.query_params["verse"] == "2"
    assert "does not exist" not in texts(at.warning)
