"""AppTests of the Contributions page (ALTI+: each output token's source share, the rollout beside raw
cross-attention, the words that owe little to the source): it draws on both shipped checkpoints; the
shares its bars show are the library's for that pair; forced on another verse's reference (a made-up
translation) it flags words in words; URL values are clamped or fall back and are written back; hostile
text gets messages, never a traceback; the curve over a run's shipped checkpoints, and its one-line
note for a checkpoint that has none.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.app_support import ROOT, array, chart, copy, default_roots, has_chart, no_exception, open_app  # noqa: F401

PAGE = "webapp/pages/contributions.py"
NUMBERS, BIBLE = ROOT / "checkpoints" / "numbers-en-de", ROOT / "checkpoints" / "bible-es-en"
PAIRS = {"numbers-en-de": ("three hundred and fourteen", "drei hundert vier zehn"),     # the first test pair
         "bible-es-en": ("Y la mujer respondió á la serpiente: Del fruto de los árboles del huerto comemos;",
                         "The woman said to the serpent, “We may eat fruit from the trees of the garden,")}
FIGURES = ("contrib_share_bars", "contrib_rollout", "contrib_cross", "contrib_attention")
MARKDOWN = ("markdown", "caption", "info", "warning", "error", "success", "subheader")
FLAG = "this word owes little to the source"

pytestmark = [pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de"),
              pytest.mark.usefixtures("default_roots")]


def open_page(ckpt="numbers-en-de", text=None, **query):
    return open_app(ckpt, PAGE, PAIRS["numbers-en-de"][0] if text is None else text, query=query)


def shown_markdown(at) -> str:
    return " ".join(str(e.value) for kind in MARKDOWN for e in at.get(kind))


def library_shares(path, source: str, reference: str) -> np.ndarray:
    """The library's source shares for `source` forced on `reference`, outside the app."""
    from explorer.studies.contributions import sentence_contributions
    from explorer.decoding.core import special_ids
    from explorer.store.checkpoint import load_checkpoint
    from explorer.text.encoding import output_ids, source_ids

    ckpt = load_checkpoint(path)
    special, max_len = special_ids(ckpt.model), ckpt.model.cfg.max_len
    return sentence_contributions(ckpt.model, source_ids(ckpt.tokenizer, source, max_len, special),
                                  output_ids(ckpt.tokenizer, reference, max_len, special)).source_share


@pytest.mark.parametrize("path", [NUMBERS, BIBLE], ids=lambda p: p.name)
def test_the_page_draws_and_its_bars_are_the_librarys_shares(path):
    if not (path / "model.safetensors").is_file():
        pytest.skip(f"needs {path.name}")
    source, reference = PAIRS[path.name]
    at = open_page(path.name, source, forced="reference")
    no_exception(at)
    assert at.title[0].value == "Contributions"
    assert all(has_chart(at, key) for key in FIGURES)
    bars = chart(at, "contrib_share_bars")["data"][0]
    # the page's shares and this run's, each rounded to 4 digits: equal, or one step apart where a rounding
    # boundary falls between two runs of the same computation
    assert np.allclose(array(bars["x"]), np.round(library_shares(path, source, reference), 4), atol=1.01e-4, rtol=0)
    rows = len(array(chart(at, "contrib_rollout")["data"][0]["z"]))
    assert rows == len(bars["y"])                                   # a rollout row per output token
    assert at.query_params["forced"] == "reference" and at.query_params["layer"] == str(at.selectbox(key="contrib_layer").options[-1])
    text = shown_markdown(at)
    assert "5th percentile" in text and "first 30 held-out test pairs with a reference" in text      # N and the percentile, stated
    assert [b.label for b in at.button if b.key == "contrib_curve_button"], "the run shipped earlier checkpoints"


def test_a_made_up_translation_gets_words_flagged():
    if not (BIBLE / "model.safetensors").is_file():
        pytest.skip("needs bible-es-en")
    at = open_page("bible-es-en", PAIRS["bible-es-en"][0], forced="detached")
    no_exception(at)
    assert at.query_params["forced"] == "detached"
    flags = [w.value for w in at.warning if FLAG in w.value]
    assert flags, shown_markdown(at)
    assert "Teacher-forced on:" in shown_markdown(at)
    bars = chart(at, "contrib_share_bars")
    assert "#d9822b" in bars["data"][0]["marker"]["color"]              # a flagged bar is coloured apart
    own = open_page("bible-es-en", PAIRS["bible-es-en"][0], forced="reference")
    assert array(chart(own, "contrib_share_bars")["data"][0]["x"]).mean() > array(bars["data"][0]["x"]).mean()


def test_url_values_are_clamped_or_fall_back_and_are_written_back():
    at = open_page(layer="999", forced="<b>", zzz="1")
    no_exception(at)
    q = dict(at.query_params)
    assert (q["layer"], q["forced"]) == ("2", "output")                 # the last of 2 decoder layers; the default
    assert "zzz" not in q
    assert "after decoder layer 2" in chart(at, "contrib_rollout")["layout"]["title"]["text"]
    low = open_page(layer="-5", forced="reference")
    no_exception(low)
    assert low.query_params["layer"] == "1" and low.query_params["forced"] == "reference"
    assert "after decoder layer 1" in chart(low, "contrib_rollout")["layout"]["title"]["text"]
    typed = open_page(text="three hundred and twenty one", forced="reference", layer="1e9")
    no_exception(typed)                                                  # no reference for a typed number: output
    assert typed.query_params["forced"] == "output" and typed.query_params["layer"] == "2"


def test_hostile_text_gets_messages_never_a_traceback():
    evil = "<script>alert(1)</script> ![i](http://127.0.0.1:8899/p.png) :red[r] $x$ **b**"
    at = open_page(text=evil, forced="detached")
    no_exception(at)
    assert at.warning, "the unknown parts of the sentence are named"
    text = shown_markdown(at)
    assert "<script>" not in text and "](http" not in text and ":red[" not in text
    for key in FIGURES:
        assert "<script>" not in str(chart(at, key))
    empty = open_page(text="   ")
    no_exception(empty)
    assert any("Type a sentence" in i.value for i in empty.info) and not empty.get("plotly_chart")


def test_the_curve_over_a_runs_checkpoints():
    at = open_page()
    at.button(key="contrib_curve_button").click().run()
    no_exception(at)
    curve = chart(at, "contrib_curve")["data"]
    assert list(curve[0]["x"]) == [150, 300, 900]                       # numbers-en-de-step150, -step300, the final
    assert np.all((array(curve[0]["y"]) > 0) & (array(curve[0]["y"]) <= 1))
    assert list(curve[1]["x"]) == [900]                                  # the checkpoint in use, circled
    at.run()
    assert has_chart(at, "contrib_curve")                                # kept for the session


def test_a_checkpoint_alone_and_without_test_pairs_says_so_in_one_line_each(tmp_path, monkeypatch):
    import json

    alone = copy(NUMBERS, tmp_path / "models" / "numbers-alone")          # alone in its folder, no test.tsv
    meta = json.loads((alone / "config.json").read_text())
    meta.get("training", {}).pop("run", None)
    (alone / "config.json").write_text(json.dumps(meta))
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(alone.parent))
    at = open_page("numbers-alone")
    no_exception(at)
    text = shown_markdown(at)
    assert "no curve over training" in text
    assert "No threshold for this checkpoint" in text and "of held\\-out pairs" in text      # no corpus built
    assert has_chart(at, "contrib_share_bars") and not [b for b in at.button if b.key == "contrib_curve_button"]


def test_without_a_calibration_nothing_is_flagged_and_the_page_says_why(monkeypatch):
    from webapp import analyses

    def no_pairs(*args, **kwargs):
        raise ValueError("no test sentences: none here")

    monkeypatch.setattr(analyses, "source_share_calibration", no_pairs)
    at = open_page(forced="detached")
    no_exception(at)
    text = shown_markdown(at)
    assert "No threshold for this checkpoint" in text and "none here" in text        # the library's reason, escaped
    bars = chart(at, "contrib_share_bars")
    assert not bars["layout"].get("shapes") and not [w for w in at.warning if FLAG in w.value]


def test_exports_are_named_for_the_checkpoint_and_the_bars_have_their_csv(monkeypatch):
    """One export convention (webapp/downloads.py): every figure through downloads.chart (the sidebar's SVG
    choice honoured, the checkpoint's name first in every file name), and the source-share bars' numbers
    beside them as CSV: a row per output token, from 1, its share as the bar shows it."""
    import io

    import pandas as pd

    from support.exports import assert_named_for, recorded_downloads

    seen = recorded_downloads(monkeypatch)
    at = open_app("numbers-en-de", PAGE, PAIRS["numbers-en-de"][0], session={"figure_format": "svg"})
    no_exception(at)
    assert_named_for(at, seen, "numbers-en-de", set(FIGURES))
    found = [b for b in seen if b["label"] == "Source shares as CSV"]
    assert found, [b["label"] for b in seen]
    table = pd.read_csv(io.StringIO(found[-1]["data"]))
    bars = chart(at, "contrib_share_bars")["data"][0]
    assert list(table["position"]) == list(range(1, len(table) + 1))
    assert np.allclose(table["source share"], array(bars["x"]), atol=1e-4)   # one set of numbers, the CSV rounded: no kernel in between
