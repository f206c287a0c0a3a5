"""AppTest of the Attention page on real checkpoints.

The heatmaps hold the library's own attention (one teacher-forced forward over the translation),
the widgets change what is shown (a different head -> different figure data), the URL restores
the view, every tab runs, the bertviz views are offline and escape the sentence, and bad input gives
messages instead of tracebacks.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from support.app_support import (array, chart, checkpoint_params, damage, has_chart, info_for, no_exception, open_app,
                         texts)
from explorer.store.checkpoint import load_checkpoint
from explorer.config import DecodeConfig
from explorer.decoding import attention_trace, translate
from explorer.inspection.attention_stats import word_alignment
from explorer.inspection.trace import KIND_LABELS, untouched_by
from support.numerics import model_atol
from webapp import sentence, state

PAGE = "webapp/pages/attention.py"
pytestmark = pytest.mark.parametrize("ckpt_path", checkpoint_params())


def expected_trace(info, text):
    ckpt = load_checkpoint(info.path)
    result = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="beam", beam_size=5, n_best=5))
    return ckpt, result, attention_trace(ckpt.model, ckpt.tokenizer, result.src_ids, result.best.ids)


def same_forward(ckpt, *values) -> float:
    """The page's forward and expected_trace's run the same inputs through the same shapes: a deterministic
    kernel gives the same bits, and model_atol (support.numerics) covers one that adds in another order from
    call to call; another head's or layer's numbers differ by > 1e-2."""
    return model_atol(ckpt.model, *values, vocab=False)


def open_tab(at, tab: str):
    at.session_state["view"] = tab
    return at.run()


def test_heatmaps_hold_the_models_attention(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text)
    no_exception(at)
    ckpt, _, trace = expected_trace(info, text)
    kind, layer, head = (at.radio(key=k).value for k in ("attn_kind", "attn_layer", "attn_head"))
    assert (kind, layer, head) == ("cross", ckpt.config.n_decoder_layers, 1)      # last layer's cross-attention
    zoom = array(chart(at, "attn_zoom")["data"][0]["z"])
    expected = trace.attention("cross", layer - 1)[0, head - 1]
    assert np.allclose(zoom, expected, atol=same_forward(ckpt, expected), rtol=0)
    grid = chart(at, "attn_grid")["data"]
    heatmaps = [t for t in grid if t["type"] == "heatmap"]
    assert len(heatmaps) == ckpt.config.n_decoder_layers * ckpt.config.n_heads
    assert len(grid) == 2 * len(heatmaps)                  # and a trace of click targets per head, in the same order
    assert at.query_params["kind"] == "cross" and at.query_params["layer"] == str(layer)


def test_another_head_changes_the_figure(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text)
    before = array(chart(at, "attn_zoom")["data"][0]["z"])
    at.radio(key="attn_head").set_value(2).run()
    no_exception(at)
    after = array(chart(at, "attn_zoom")["data"][0]["z"])
    assert not np.allclose(before, after)
    ckpt, _, trace = expected_trace(info, text)
    layer = at.radio(key="attn_layer").value
    expected = trace.attention("cross", layer - 1)[0, 1]
    assert np.allclose(after, expected, atol=same_forward(ckpt, expected), rtol=0)
    assert at.query_params["head"] == "2"
    at.radio(key="attn_layer").set_value(1).run()
    expected = trace.attention("cross", 0)[0, 1]
    shown = array(chart(at, "attn_zoom")["data"][0]["z"])
    assert np.allclose(shown, expected, atol=same_forward(ckpt, expected), rtol=0)


def test_scores_scaling_and_causal_mask(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text, query={"kind": "decoder", "layer": 1, "head": 1})
    no_exception(at)
    assert at.radio(key="attn_kind").value == "decoder"                     # restored from the URL
    ckpt, _, trace = expected_trace(info, text)
    at.selectbox(key="attn_quantity").set_value("scores").run()
    scaled = array(chart(at, "attn_zoom")["data"][0]["z"])
    raw = trace.attention("decoder", 0, "scores")[0, 0]
    future = np.triu(np.ones_like(raw, dtype=bool), k=1)
    atol = same_forward(ckpt, raw[~future])
    assert np.all(np.isnan(scaled[future])) and np.allclose(scaled[~future], raw[~future], atol=atol, rtol=0)
    at.selectbox(key="attn_quantity").set_value("unscaled").run()
    unscaled = array(chart(at, "attn_zoom")["data"][0]["z"])
    d_k = ckpt.config.d_model // ckpt.config.n_heads
    assert np.allclose(unscaled[~future], raw[~future] * math.sqrt(d_k), atol=atol * math.sqrt(d_k), rtol=0)
    assert "d_k = " in texts(at.caption)
    assert len(chart(at, "attn_zoom")["data"]) == 1
    at.toggle(key="attn_mask").set_value(True).run()
    no_exception(at)
    data = chart(at, "attn_zoom")["data"]
    if future.any():                                                         # more than one target position
        assert len(data) == 2 and np.array_equal(~np.isnan(array(data[1]["z"])), future)


def test_summary_and_alignment_tabs(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_tab(open_app(info.name, PAGE, text=text), "Head summary")
    no_exception(at)
    for kind in ("encoder", "decoder", "cross"):
        assert has_chart(at, f"stat_{kind}")
    ckpt, _, trace = expected_trace(info, text)
    entropy = array(chart(at, "stat_encoder")["data"][0]["z"])
    w = trace.attention("encoder", 0)[0, 0].astype(np.float64)
    # each weight within same_forward; an entropy term moves by |log w + 1| times that (another head's
    # entropy differs by > 0.1)
    spread = w.shape[-1] * same_forward(ckpt, w) * (1 + np.abs(np.log(w[w > 0])).max())
    assert entropy[0, 0] == pytest.approx(float(np.mean(-(w * np.log(np.where(w > 0, w, 1))).sum(-1))), abs=spread)
    at.selectbox(key="attn_stat").set_value("diagonality").run()
    assert not np.allclose(array(chart(at, "stat_encoder")["data"][0]["z"]), entropy)
    at = open_tab(at, "Word alignment")
    no_exception(at)
    cross = trace.attention("cross", trace.n_layers("cross") - 1)[0]             # [H, T, S], the last layer
    for stem, matrix in (("mean", cross.mean(axis=0)), ("H1", cross[0])):        # head 1 is the default
        expected = word_alignment(matrix, trace.src_tokens, trace.meta.get("out_tokens") or [])
        assert expected.tgt_words and expected.src_words, "the test sentence and its translation have words"
        shown = array(chart(at, f"align_{stem}")["data"][0]["z"])
        assert shown.shape == (len(expected.tgt_words), len(expected.src_words))
        # each side rounded to 4 digits, plus the two forwards' difference summed over a word's pieces
        atol = 1e-4 + matrix.shape[-1] * same_forward(ckpt, matrix)
        assert np.allclose(shown, np.round(expected.matrix, 4), atol=atol, rtol=0)
    assert "No words to align" not in texts(at.info)


def test_url_restores_the_open_tab(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, query={"text": text, "view": "Word alignment", "head": 2})
    no_exception(at)
    assert at.radio(key="attn_head").value == 2
    assert has_chart(at, "align_mean") and not has_chart(at, "attn_zoom")   # only the open tab ran


def test_output_vs_reference(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_tab(open_app(info.name, PAGE, text=text), "Output vs reference")
    no_exception(at)
    reference = sentence.reference_for(info.path, text)
    if not reference:
        assert "Type a reference" in texts(at.info)
        _, result, _ = expected_trace(info, text)
        at.text_input(key="attn_reference").set_value(result.text + " extra").run()
        no_exception(at)
    left = chart(at, "cmp_model output")
    right = chart(at, "cmp_reference")
    assert array(left["data"][0]["z"]).shape[1] == array(right["data"][0]["z"]).shape[1]   # same source
    at.radio(key="attn_kind").set_value("encoder").run()
    assert "does not depend on the target" in texts(at.info)


def test_head_ablation(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_tab(open_app(info.name, PAGE, text=text), "Head ablation")
    no_exception(at)
    assert "Pick heads in the list above" in texts(at.info)
    ckpt = load_checkpoint(info.path)
    every = [(k, layer, h) for k in ("encoder", "decoder", "cross")
             for layer in range(ckpt.config.n_encoder_layers if k == "encoder" else ckpt.config.n_decoder_layers)
             for h in range(ckpt.config.n_heads)]
    at.multiselect(key="ablate_pick").set_value([h for h in every if h[0] == "cross"]).run()   # all cross heads
    no_exception(at)
    cfg = DecodeConfig(strategy="beam", beam_size=5, n_best=5)
    ablated = translate(ckpt.model, ckpt.tokenizer, text, cfg, ablate=[h for h in every if h[0] == "cross"])
    assert ("Without those heads:** " + state.md_escape(ablated.text or "(empty)")) in texts(at.markdown)
    delta = array(chart(at, "ablation_delta")["data"][0]["y"])
    assert np.any(np.abs(delta) > 1e-4)                                      # no source: the model is less sure
    assert has_chart(at, "ablation_diff")
    # a block no switched-off head can reach changes by exactly zero, and the page says why; a block
    # downstream of them gets no such note
    title = chart(at, "ablation_diff")["layout"]["title"]["text"]
    kind = next(k for k, label in KIND_LABELS.items() if f"({label})" in title)
    layer = int(title.split(" L", 1)[1].split(" ", 1)[0]) - 1
    cut = [h for h in every if h[0] == "cross"]
    assert ("by construction" in texts(at.caption)) == untouched_by(kind, layer, cut), (title, texts(at.caption))
    at.radio(key="attn_kind").set_value("cross").run()                    # cross-attention of the last layer:
    at.radio(key="attn_layer").set_value(ckpt.config.n_decoder_layers).run()   # downstream of the first layer's
    no_exception(at)
    assert "by construction" not in texts(at.caption)
    at.radio(key="attn_kind").set_value("encoder").run()                  # upstream of every cross head
    no_exception(at)
    assert "by construction" in texts(at.caption)


def test_bertviz_views_are_offline_and_escaped(ckpt_path):
    info, _ = info_for(ckpt_path)
    hostile = "<img src=x onerror=alert(1)> </script><script>alert(2)</script>"
    at = open_tab(open_app(info.name, PAGE, text=hostile), "bertviz")
    no_exception(at)
    assert not at.get("iframe")                                              # built only on request
    at.toggle(key="bertviz_on").set_value(True).run()
    no_exception(at)
    frames = at.get("iframe")
    assert len(frames) == 2
    for frame in frames:
        html = frame.proto.srcdoc or frame.proto.src
        assert len(html) > 100_000 and "d3" in html
        assert not re.search(r"https?://", html)
        assert "<img" not in html and "alert(2)</script>" not in html
        assert "cdnjs" not in html and "require.config" not in html


def test_empty_input_and_damaged_checkpoint(ckpt_path, tmp_path, monkeypatch):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text="")
    no_exception(at)
    assert "Type a sentence" in texts(at.info)
    damage(info.path, tmp_path / "root" / "broken", "bytes")
    monkeypatch.setenv(state.ROOTS_ENV, str(tmp_path / "root"))
    at = open_app(None, PAGE, text=text)
    no_exception(at)
    assert "cannot be used" in texts(at.error)
    assert "Pick a working checkpoint" in texts(at.info)


@pytest.mark.parametrize("odd", ["🙂🚀 ✨", "Ελληνικά 中文 العربية", "<img src=x onerror=alert(1)>"])
def test_odd_and_long_input(ckpt_path, odd):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=odd)
    no_exception(at)
    for md in at.markdown:
        assert "<img" not in md.value
    assert has_chart(at, "attn_zoom")
    at.text_area(key="attn_text_box").set_value((text + " ") * 200).run()
    no_exception(at)
    assert f"only the first {sentence.MAX_CHARS:,}" in texts(at.warning)
    assert has_chart(at, "attn_zoom")


def test_a_long_sentence_in_a_link_is_cut_with_a_notice(ckpt_path):
    info, text = info_for(ckpt_path)
    long_text = ((text + " ") * 200)[:5000]
    at = open_app(info.name, PAGE, query={"text": long_text})                 # a shared link
    no_exception(at)
    assert at.session_state["text"] == long_text[:sentence.MAX_CHARS]
    assert f"The text is 5,000 characters long; only the first {sentence.MAX_CHARS:,}" in texts(at.warning)
    at.text_area(key="attn_text_box").set_value(text).run()         # a new, short sentence: no notice
    assert "only the first" not in texts(at.warning)


def test_switching_checkpoint_keeps_the_page_working(ckpt_path):
    from support.app_support import candidate_checkpoints

    others = [p for p in candidate_checkpoints() if p != ckpt_path]
    if not others or ckpt_path != candidate_checkpoints()[0]:
        pytest.skip("needs two shipped checkpoints (runs once)")
    info, text = info_for(ckpt_path)
    other, _ = info_for(others[0])
    at = open_tab(open_app(info.name, PAGE, text=text), "Head ablation")
    ckpt = load_checkpoint(info.path)
    last = ckpt.config.n_decoder_layers - 1
    at.multiselect(key="ablate_pick").set_value([("cross", last, ckpt.config.n_heads - 1)]).run()
    at.radio(key="attn_layer").set_value(last + 1).run()
    no_exception(at)
    at.sidebar.selectbox(key="ckpt_pick").set_value(str(other.path)).run()     # the picker's value is a path
    no_exception(at)
    assert at.query_params["ckpt"] == other.name
    n_layers = load_checkpoint(other.path).config.n_decoder_layers
    assert 1 <= at.radio(key="attn_layer").value <= n_layers
