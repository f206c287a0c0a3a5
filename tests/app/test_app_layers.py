"""AppTests of the Layers page (the DecoderLens table and the decoder's logit lens), on the shipped
numbers-en-de (2 + 2 layers: fast): the page draws a translation per encoder depth and a grid with a
row per output piece and a column per decoder layer; its URL values are clamped or fall back and are
written back; the logit lens reads the reference when asked; hostile text and an absurd sentence
give messages, never a traceback; presenter mode hides the advanced control and keeps the figure.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.app_support import ROOT, array, chart, default_roots, no_exception, open_app  # noqa: F401

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
PAGE = "webapp/pages/layers.py"
TEXT = "three hundred and twenty one"
TEST_PAIR = ("three hundred and fourteen", "drei hundert vier zehn")        # the first pair of its test.tsv
MARKDOWN = ("markdown", "caption", "info", "warning", "error", "success", "subheader")

pytestmark = [pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de"),
              pytest.mark.usefixtures("default_roots")]


def open_layers(text=TEXT, **query):
    return open_app("numbers-en-de", PAGE, text, query=query)


def grid(at) -> dict:
    return next(t for t in chart(at, "layers_lens_grid")["data"] if t["type"] == "heatmap")


def shown_markdown(at) -> str:
    return " ".join(str(e.value) for kind in MARKDOWN for e in at.get(kind))


def test_the_page_draws_a_translation_per_encoder_depth_and_the_lens_grid():
    at = open_layers()
    no_exception(at)
    assert at.title[0].value == "Layers"
    table = at.dataframe[0].value
    assert list(table["the decoder reads"]) == ["embeddings", "layer 1", "layer 2 (the model)"]
    assert table["translation"].iloc[-1] == "drei hundert ein und zwanzig"       # the model's own greedy output
    assert table["as the model's"].iloc[-1] == "yes"
    heat = grid(at)
    z = array(heat["z"])
    pieces = "▁drei ▁hundert ▁ein ▁und ▁zwanzig </s>".split()
    assert z.shape == (len(pieces), 2)                                   # a row per output piece, a column per layer
    assert np.all((z >= 0) & (z <= 1))
    assert [row[-1] for row in heat["text"]] == [p.replace("<", "&lt;").replace(">", "&gt;") for p in pieces]
    assert dict(at.query_params) | {"lens_beam": "1", "forced": "output", "show": "top"} == dict(at.query_params)
    assert "top-1 agreement" in shown_markdown(at) and "layer 2: 100%" in shown_markdown(at)


def test_url_values_are_clamped_or_fall_back_and_are_written_back():
    at = open_layers(lens_beam="999", forced="reference", show="<b>", zzz="1")
    no_exception(at)
    assert at.number_input(key="layers_beam").value == 8                # clamped to the largest beam offered
    q = dict(at.query_params)
    assert (q["lens_beam"], q["forced"], q["show"]) == ("8", "output", "top")  # no reference for a typed number: output
    assert "zzz" not in q                                              # a key the page does not read is dropped
    assert "Beam search (8 beams)" in shown_markdown(at)
    low = open_layers(lens_beam="-3", show="final")
    no_exception(low)
    assert low.query_params["lens_beam"] == "1" and low.query_params["show"] == "final"
    nonsense = open_layers(lens_beam="1e9", forced="", show="")
    no_exception(nonsense)
    assert nonsense.query_params["lens_beam"] == "1"                        # malformed: the default


def test_the_logit_lens_reads_the_reference_when_asked():
    src, ref = TEST_PAIR
    at = open_layers(src, forced="reference")
    no_exception(at)
    assert at.query_params["forced"] == "reference"
    labels = chart(at, "layers_lens_grid")["layout"]["yaxis"]["ticktext"]
    assert [label.split(": ", 1)[1] for label in labels] == [f"▁{w}" for w in ref.split()] + ["&lt;/s&gt;"]
    assert "the reference translation" in shown_markdown(at)


def test_hostile_text_is_shown_as_text():
    evil = "<script>alert(1)</script> ![i](http://127.0.0.1:8899/p.png) :red[r] $x$ **b**"
    at = open_layers(evil)
    no_exception(at)
    assert at.warning, "the unknown parts of the sentence are named"
    text = shown_markdown(at)
    assert "<script>" not in text and "](http" not in text and ":red[" not in text
    assert all("<script>" not in str(t) for t in grid(at)["text"])     # the figure's pieces are escaped


def test_an_empty_sentence_stops_with_a_message():
    at = open_layers("   ")
    no_exception(at)
    assert any("Type a sentence" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_presenter_mode_hides_the_beam_size_and_keeps_the_figures():
    at = open_layers(present="1", lens_beam="3")
    no_exception(at)
    assert not [n for n in at.number_input if n.key == "layers_beam"]   # advanced: hidden
    assert at.query_params["lens_beam"] == "3"                              # but a link's value still counts
    assert "Beam search (3 beams)" in shown_markdown(at)
    assert grid(at) and at.dataframe


def test_exports_are_named_for_the_checkpoint_and_the_grid_has_its_csv(monkeypatch):
    """One export convention (webapp/downloads.py): the logit-lens grid is drawn through downloads.chart (the
    sidebar's SVG choice honoured, the checkpoint's name first), and its numbers are beside it as CSV: a row
    per cell, positions and layers from 1, the probability the grid is coloured by."""
    import io

    import pandas as pd

    from support.exports import assert_named_for, recorded_downloads

    seen = recorded_downloads(monkeypatch)
    at = open_app("numbers-en-de", PAGE, TEXT, session={"figure_format": "svg"})
    no_exception(at)
    assert_named_for(at, seen, "numbers-en-de", {"layers_lens_grid"})
    found = [b for b in seen if b["label"] == "The grid as CSV"]
    assert found, [b["label"] for b in seen]
    table = pd.read_csv(io.StringIO(found[-1]["data"]))
    z = array(grid(at)["z"])                                            # [positions, layers], p of the top piece
    assert len(table) == z.size and sorted(set(table["decoder layer"])) == [1, 2]
    assert table["position"].iloc[0].startswith("1: ")
    assert np.allclose(table["p(top piece)"].to_numpy().reshape(z.shape), z, atol=1e-4)   # one set of numbers, the CSV rounded
