"""AppTests of the faithfulness shown beside the app's attributions: the Contributions page's three maps of a
layer (on a press), the Alignment page's "why this word" scores and the Beam search page's contrastive
attribution each get a table of comprehensiveness and sufficiency beside the random-order baseline, with a
caption saying what the numbers mean, and the numbers shown are the library's
(explorer.studies.contributions.faithfulness.attribution_faithfulness) for the sentence and the attribution
drawn. On the shipped numbers-en-de, whose short sentences keep each page to a few forward passes, and the
Alignment page on the Bible too, whose words of several pieces are removed whole.

Why the attribution drawn, not one computed again here: sharp attention puts several source tokens within
float rounding of each other at the top-k boundary (a gap of 1e-8 where the rounding bound is 2e-4), so a
ranking computed twice may remove other tokens on another kernel. The tests take the page's own scores (a
figure's exact values, or the page's cached analysis, asserted to be the one the page drew) and run only the
erasures again; what remains between the two is the teacher-forced passes' rounding: a measure is a
difference of two log-probs (twice model_atol), a contrast's a difference of two of them (four times).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from support.app_support import ROOT, array, chart, default_roots, no_exception, open_app, texts  # noqa: F401
from support.numerics import model_atol

NUMBERS, BIBLE = ROOT / "checkpoints" / "numbers-en-de", ROOT / "checkpoints" / "bible-es-en"
TEXT, REFERENCE = "three hundred and fourteen", "drei hundert vier zehn"      # the first test pair
MEASURES = ("comprehensiveness", "sufficiency")
COLUMNS = ("comprehensiveness", "random: comprehensiveness", "sufficiency", "random: sufficiency")

pytestmark = [pytest.mark.usefixtures("default_roots"),
              pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")]


@pytest.fixture(scope="module")
def loaded():
    """The app's own loaded numbers-en-de (webapp.models.load: the object whose cache_key the pages use)."""
    from webapp import models

    return models.load(NUMBERS)


def faith_table(at) -> pd.DataFrame:
    found = [t.value for t in at.table if "random: comprehensiveness" in t.value.columns]
    assert len(found) == 1, f"{len(found)} faithfulness tables; tables: {[list(t.value.columns) for t in at.table]}"
    return found[0]


def shown_rows(table: pd.DataFrame) -> np.ndarray:
    """[rows, 4]: each attribution's measures and the random baseline's, in COLUMNS order."""
    assert list(table.columns) == ["attribution", *COLUMNS]
    return table[list(COLUMNS)].to_numpy(dtype=float)


def expected_row(result: dict, name: str) -> list[float]:
    mine, random = result["rankings"][name], result["random"]
    return [mine["comprehensiveness"], random["comprehensiveness"], mine["sufficiency"], random["sufficiency"]]


def assert_explained(at) -> None:
    words = texts(at.caption).replace("\\", "")
    for said in ("**comprehensiveness**", "**sufficiency**", "**random** orders", "higher", "lower"):
        assert said in words, said


def test_contributions_shows_each_maps_faithfulness_on_a_press_and_the_numbers_are_the_librarys(loaded):
    from explorer.decoding.core import special_ids
    from explorer.studies.contributions.faithfulness import attribution_faithfulness
    from explorer.text.encoding import output_ids, source_ids
    from webapp import analyses

    analyses.contribution_faithfulness.clear()            # another test's press must not answer this one
    at = open_app("numbers-en-de", "webapp/pages/contributions.py", TEXT, query={"forced": "reference"})
    no_exception(at)
    assert not [t for t in at.table if "random: comprehensiveness" in t.value.columns]    # asked first
    at.button(key="contrib_faith_button").click().run()
    no_exception(at)
    assert not at.error, texts(at.error)
    model, special = loaded.model, special_ids(loaded.model)
    src = tuple(source_ids(loaded.tokenizer, TEXT, model.cfg.max_len, special))
    out = tuple(output_ids(loaded.tokenizer, REFERENCE, model.cfg.max_len, special))
    assert analyses.contributions.holds(loaded, src, out), "the page drew the maps of another pair"
    sc = analyses.contributions(loaded, src, out)          # the maps the page drew, from its cache
    atol = 2 * model_atol(model, [-1.0])
    for layer in (2, 1):                                   # the last layer (the page's default), then the first
        if layer == 1:
            at.selectbox(key="contrib_layer").set_value(1).run()
            at.button(key="contrib_faith_button").click().run()
            no_exception(at)
        at_ = layer - 1
        maps = {"rollout": sc.rollout[at_][:, :sc.n_src], "cross block": sc.cross_source[at_],
                "cross-attention": sc.cross_attention[at_]}
        want = attribution_faithfulness(model, list(src), list(out), maps)
        table = faith_table(at)
        assert [label.replace("\\", "") for label in table["attribution"]] == [
            f"ALTI+ rolled out after layer {layer} (source part)", f"ALTI+ cross block, layer {layer}",
            f"raw cross-attention, layer {layer}"]
        np.testing.assert_allclose(shown_rows(table), [expected_row(want, name) for name in maps], rtol=0, atol=atol)
        assert_explained(at)
        words = texts(at.caption).replace("\\", "")
        assert f"k = {', '.join(map(str, want['k']))}" in words and f"the {len(out)} output tokens" in words
    # a rollout read as an explanation beats random orders on this pair (far beyond the rounding bound)
    assert want["rankings"]["rollout"]["comprehensiveness"] > want["random"]["comprehensiveness"] + 10 * atol
    at.run()                                               # measured in this session: shown again without a press
    assert len(faith_table(at)) == 3 and not [b for b in at.button if b.key == "contrib_faith_button"]


@pytest.mark.parametrize("path", [NUMBERS, BIBLE], ids=lambda p: p.name)
def test_alignment_shows_why_this_words_faithfulness_and_the_numbers_are_the_librarys(path):
    """On numbers-en-de a word is one piece; on the Bible the word asked about and some source words are
    several, removed together (the units are words)."""
    from explorer.studies.align.pairs import model_pair
    from explorer.studies.contributions.faithfulness import attribution_faithfulness
    from webapp import models
    from webapp.views.alignment import shipped_gold

    if not (path / "model.safetensors").is_file():
        pytest.skip(f"needs {path.name}")
    loaded = models.load(path)
    at = open_app(path.name, "webapp/pages/alignment.py", TEXT if path == NUMBERS else None)
    no_exception(at)
    pair = shipped_gold(*loaded.cache_key)[0][next(s for s in at.selectbox if s.label.startswith("Sentence pair")).value]
    mp = model_pair(loaded.model, loaded.tokenizer, pair)
    why = next(s for s in at.selectbox if s.label.startswith("Why this word?"))
    if path == NUMBERS:
        asked = (0, 2)
    else:
        asked = (0, next(t for t, pieces in enumerate(mp.tgt_groups) if len(pieces) > 1))
        assert any(len(pieces) > 1 for pieces in mp.src_groups), "a source word of several pieces"
    atol = 2 * model_atol(loaded.model, [-1.0])
    for word in asked:
        if word:
            why.set_value(word).run()
            no_exception(at)
        assert not at.error, texts(at.error)
        drawn = {t["name"]: array(t["customdata"]) for t in chart(at, "align_why_fig")["data"]}   # exact scores
        assert len(drawn) >= 3                                      # the chosen aligner and the others
        want = attribution_faithfulness(loaded.model, mp.src_ids, mp.out_ids, drawn,
                                        positions=mp.tgt_groups[word], groups=mp.src_groups)
        table = faith_table(at)
        assert [label.replace("\\", "") for label in table["attribution"]] == list(drawn)
        np.testing.assert_allclose(shown_rows(table), [expected_row(want, name) for name in drawn], rtol=0, atol=atol)
        assert_explained(at)
        assert f"log p of “{pair.tgt[word]}”" in texts(at.caption).replace("\\", "")
        assert want["units"] == len(pair.src) and want["positions"] == mp.tgt_groups[word]


def test_beam_contrast_shows_its_faithfulness_and_the_numbers_are_the_librarys(loaded):
    from explorer.config import DecodeConfig
    from explorer.decoding.translate import translate
    from explorer.studies.common.gradients import IG_STEPS
    from explorer.studies.contrastive.foils import step_of
    from explorer.studies.contributions.faithfulness import attribution_faithfulness
    from webapp import analyses

    at = open_app("numbers-en-de", "webapp/pages/beam.py", TEXT, query={"contrast": "1"})
    no_exception(at)
    assert not at.error, texts(at.error)
    trace = translate(loaded.model, loaded.tokenizer, TEXT, DecodeConfig(beam_size=5), trace=True).beam_trace
    step = step_of(trace, trace.best_path()[0])             # the page opens on step 1's best hypothesis
    src = list(translate(loaded.model, loaded.tokenizer, TEXT, DecodeConfig(beam_size=5)).src_ids)
    foil_box = next(s for s in at.selectbox if s.key.startswith("beam_foil_"))
    atol = 2 * model_atol(loaded.model, [-1.0])
    for method, label in (("integrated-gradients", "integrated gradients"), ("grad-x-input", "gradient x input")):
        if method != "integrated-gradients":
            at.radio(key="beam_contrast_method").set_value(method).run()
            no_exception(at)
        foil = int(foil_box.value)
        assert analyses.contrast.holds(loaded, tuple(src), tuple(step.prefix), step.chosen, foil, IG_STEPS)
        figure = chart(at, "beam_contrast_chart")
        n_src = sum(t.startswith("src ") for t in figure["layout"]["xaxis"]["ticktext"])
        bars = {t["name"].split(":")[0]: array(t["y"])[:n_src] for t in figure["data"] if t.get("type") == "bar"}
        contrast = attribution_faithfulness(loaded.model, src, [*step.prefix, step.chosen], {"c": bars["contrast"]},
                                            positions=[len(step.prefix)], foil=foil)
        plain = attribution_faithfulness(loaded.model, src, [*step.prefix, step.chosen], {"p": bars["plain"]},
                                         positions=[len(step.prefix)])
        table = faith_table(at)
        assert [t.replace("\\", "") for t in table["attribution"]] == [
            f"contrast ({label}), on log p(chosen) − log p(foil)", f"plain ({label}), on log p(chosen)"]
        shown = shown_rows(table)
        # the contrast's measures are differences of two measures: twice the plain ones' bound
        np.testing.assert_allclose(shown[0], expected_row(contrast, "c"), rtol=0, atol=2 * atol)
        np.testing.assert_allclose(shown[1], expected_row(plain, "p"), rtol=0, atol=atol)
        assert_explained(at)
        assert "the decoder's inputs are not removed" in texts(at.caption)
