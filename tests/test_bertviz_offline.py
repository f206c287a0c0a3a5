"""The offline bertviz documents: no URL, tokens escaped, weights rounded, size limited, and (when
Chromium is installed) they really draw in a browser that has no network."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from explorer.ui import bertviz_offline as bv

HOSTILE = ["<img src=x onerror=\"window.PWNED=1\">", "</script><script>window.PWNED=2</script>", "&amp;", "▁ok", "</s>"]
TGT = ["<s>", "▁\"quoted\"", "▁it's", "▁<b>"]


def stacks(layers=2, heads=3, src=len(HOSTILE), tgt=len(TGT), seed=0):
    rng = np.random.default_rng(seed)

    def soft(*shape):
        x = rng.random(shape)
        return (x / x.sum(-1, keepdims=True)).astype(np.float32)

    return {"encoder": soft(layers, heads, src, src), "decoder": soft(layers, heads, tgt, tgt),
            "cross": soft(layers, heads, tgt, src)}


def params_of(html: str) -> dict:
    match = re.search(r"const params = (\{.*?\});", html)
    assert match, "no params in the document"
    return json.loads(match.group(1))


@pytest.mark.parametrize("view", ["head", "model"])
def test_document_is_self_contained(view):
    html, note = bv.render(view, stacks(), HOSTILE, TGT, layer=1)
    assert note == ""
    assert not re.search(r"https?://", html)
    assert "cdnjs" not in html and "require.config" not in html
    assert "d3js.org v5.7.0" in html and "jQuery v3.7.1" in html           # libraries inlined
    assert "default-src 'none'" in html                                     # and nothing may be fetched


@pytest.mark.parametrize("view", ["head", "model"])
def test_tokens_cannot_break_out_of_the_script(view):
    html, _ = bv.render(view, stacks(), HOSTILE, TGT)
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 3                                               # libraries, shim, view: no more
    assert "<img" not in html and "window.PWNED=2</script>" not in html
    params = params_of(html)
    data = {d["name"]: d for d in params["attention"]}
    assert data["Encoder"]["left_text"][:2] == HOSTILE[:2]                  # the same strings, safely encoded
    assert data["Cross"]["left_text"][1] == ' "quoted"' and data["Cross"]["right_text"] == bv.pretty_tokens(HOSTILE)


def test_weights_rounded_to_three_decimals():
    s = stacks()
    html, _ = bv.render("head", s, HOSTILE, TGT)
    enc = np.asarray(params_of(html)["attention"][0]["attn"])
    assert enc.shape == s["encoder"].shape
    assert np.allclose(enc, np.round(s["encoder"].astype(np.float64), 3))
    assert not re.search(r"\d\.\d{4,}", params_of_text(html))              # no float32 noise


def params_of_text(html: str) -> str:
    return re.search(r"const params = (\{.*?\});", html).group(1)


def test_opens_on_the_chosen_layer_and_kind():
    html, _ = bv.render("head", stacks(), HOSTILE, TGT, layer=1, kind="cross")
    params = params_of(html)
    assert params["layer"] == 1 and params["default_filter"] == "2"
    assert '<option value="2" selected>Cross</option>' in html


def test_size_limit_falls_back_to_one_layer_then_refuses():
    s = stacks(layers=3, heads=2)
    per_layer = sum(int(np.prod(a.shape[1:])) for a in s.values())
    layers, note = bv.choose_layers(s, layer=2, max_values=per_layer * 3)
    assert layers == [0, 1, 2] and note == ""
    layers, note = bv.choose_layers(s, layer=2, max_values=per_layer * 2)
    assert layers == [2] and "layer 3 only" in note
    html, note = bv.render("model", s, HOSTILE, TGT, layer=2, max_values=per_layer * 2)
    assert len(params_of(html)["attention"][0]["attn"]) == 1 and note
    with pytest.raises(bv.ViewTooLarge):
        bv.render("head", s, HOSTILE, TGT, max_values=per_layer - 1)


def test_mismatched_tokens_and_bad_view_raise():
    with pytest.raises(ValueError):
        bv.render("head", stacks(), HOSTILE[:-1], TGT)
    with pytest.raises(ValueError):
        bv.render("neuron", stacks(), HOSTILE, TGT)
    assert bv.height("head", stacks()) > 100 and bv.height("model", stacks()) > 100


def test_safe_json_round_trips():
    value = {"t": ["</script>", "<!--", "a&b", "\u2028"]}
    text = bv.safe_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value
