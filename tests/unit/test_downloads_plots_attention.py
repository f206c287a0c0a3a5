"""Downloads (CSV, JSON bundle, figure config) and the attention figure builders, without Streamlit."""
from __future__ import annotations

import io
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from explorer.inspection.attention_stats import word_alignment
from explorer.decoding import Translation, TranslatedHypothesis
from explorer.plots import attention as plots
from explorer.plots.style import head_grid
from explorer.plots.translation import token_probs_figure
from explorer.inspection.trace import Trace
from webapp import downloads

TOKENS = ["▁<b>bold</b>", "▁a", "▁a", "</s>"]          # a repeated token and markup


def test_matrix_csv_keeps_repeats_and_defuses_formulas():
    m = np.arange(8, dtype=float).reshape(2, 4) / 10
    text = downloads.matrix_csv(m, ["=cmd()", "+x"], TOKENS)
    frame = pd.read_csv(io.StringIO(text), index_col=0)
    assert list(frame.index) == ["1:=cmd()", "2:+x"]    # numbered from 1: no label starts like a formula
    assert list(frame.columns) == ["1:▁<b>bold</b>", "2:▁a", "3:▁a", "4:</s>"]
    assert np.allclose(frame.to_numpy(), m)
    with pytest.raises(ValueError):
        downloads.matrix_csv(m, ["a"], TOKENS)


def test_table_csv_defuses_formulas():
    frame = pd.DataFrame({"translation": ["=HYPERLINK(\"x\")", "fine", "-1+2"], "score": [-1.5, 0.0, 2.0]})
    back = pd.read_csv(io.StringIO(downloads.table_csv(frame)))
    assert list(back["translation"]) == ["'=HYPERLINK(\"x\")", "fine", "'-1+2"]
    assert list(back["score"]) == [-1.5, 0.0, 2.0]                         # numbers untouched


def test_file_stem_and_plotly_config():
    assert downloads.file_stem("bible-es-en", "cross", "L2", None, "H3") == "bible-es-en_cross_L2_H3"
    assert downloads.file_stem("../../etc/passwd") == "etc-passwd"
    cfg = downloads.plotly_config("x y", fmt="svg")
    assert cfg["displaylogo"] is False and cfg["toImageButtonOptions"]["format"] == "svg"
    assert downloads.plotly_config("x", fmt="exe")["toImageButtonOptions"]["format"] == "png"


def _fake():
    hyp = TranslatedHypothesis(ids=[5, 3], pieces=["▁hi", "</s>"], text="hi", score=-0.5, normalized=-0.4,
                               token_logprobs=[-0.3, -0.2], finished=True)
    result = Translation(source="<img src=x>", src_ids=[7, 3], src_pieces=["▁hola", "</s>"], hypotheses=[hyp])
    rng = np.random.default_rng(0)
    arrays = {}
    for stack, block, q, k in (("encoder", "self_attn", 2, 2), ("decoder", "self_attn", 2, 2),
                               ("decoder", "cross_attn", 2, 2)):
        w = rng.random((1, 2, q, k)).astype(np.float32)
        arrays[f"{stack}.layers.0.{block}.weights"] = w / w.sum(-1, keepdims=True)
    trace = Trace(arrays=arrays, src_tokens=["▁hola", "</s>"], tgt_tokens=["<s>", "▁hi"],
                  meta={"out_tokens": ["▁hi", "</s>"]})
    ckpt = SimpleNamespace(name="demo", sha256="abc123", meta={"src_lang": "es", "tgt_lang": "en",
                                                               "training": {"step": 9}})
    return ckpt, result, trace


def test_bundle_is_plain_json_with_everything():
    ckpt, result, trace = _fake()
    bundle = downloads.analysis_bundle(ckpt, result, {"strategy": "beam"}, {"kind": "cross"}, trace,
                                       extra={"stats": np.array([1.0, float("nan")])})
    text = downloads.bundle_bytes(lambda: bundle)().decode("utf-8")
    back = json.loads(text)
    assert back["checkpoint"] == {"name": "demo", "sha256": "abc123", "src_lang": "es", "tgt_lang": "en", "step": 9}
    assert back["input"]["text"] == "<img src=x>" and back["settings"]["decode"]["strategy"] == "beam"
    assert back["output"]["hypotheses"][0]["token_logprobs"] == [-0.3, -0.2]
    cross = np.asarray(back["attention"]["cross"])
    assert cross.shape == (1, 2, 2, 2)
    assert np.allclose(cross, trace.attention("cross", 0)[0][None], atol=1e-5)
    assert back["stats"] == [1.0, None]                                    # NaN is not JSON


def test_jsonable_handles_inf_and_numpy_scalars():
    out = downloads.jsonable({"a": np.float32(0.5), "b": np.int64(3), "c": (1, 2), "d": np.array([-np.inf, 1.0])})
    assert out == {"a": 0.5, "b": 3, "c": [1, 2], "d": [None, 1.0]}


def test_head_heatmap_escapes_and_keeps_repeats():
    m = np.eye(4)
    fig = plots.head_heatmap(m, TOKENS, TOKENS, "t")
    assert list(fig.layout.yaxis.ticktext) == ["▁&lt;b&gt;bold&lt;/b&gt;", "▁a", "▁a", "&lt;/s&gt;"]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2, 3]              # numeric axis: repeats stay apart
    assert fig.data[0].customdata[0, 0, 0] == "▁&lt;b&gt;bold&lt;/b&gt;"
    with pytest.raises(ValueError):
        plots.head_heatmap(m, TOKENS[:3], TOKENS, "t")


def test_head_heatmap_margins_fit_the_labels():
    """Margins are set from the labels (plotly's automargin would redraw the figure a second time)."""
    short = plots.head_heatmap(np.eye(3), ["▁a", "▁b", "▁c"], ["▁x", "▁y", "▁z"], "t")
    many_keys = [f"▁key{i}" for i in range(30)]
    long = plots.head_heatmap(np.ones((2, 30)) / 30, ["▁a", "▁extraordinarily"], many_keys, "t")
    assert not short.layout.xaxis.automargin and not short.layout.yaxis.automargin
    assert short.layout.xaxis.tickangle == 0 and long.layout.xaxis.tickangle == -90   # many keys: upright
    sentence = ["▁El", "▁perro", "▁come", "▁pan", "▁en", "▁la", "▁casa", "▁.", "</s>"]   # 9 keys, too long side by side
    assert plots.head_heatmap(np.eye(9), sentence, sentence, "t").layout.xaxis.tickangle == -90
    assert long.layout.margin.l > short.layout.margin.l + 7 * (len("▁extraordinarily") - len("▁a")) - 1
    assert long.layout.margin.b >= 7 * len("▁key29")                                 # room for upright keys


def test_head_heatmap_scores_mask_and_predicts():
    scores = np.array([[1.0, -np.inf], [2.0, -3.0]])
    mask = np.array([[False, True], [False, False]])
    fig = plots.head_heatmap(scores, ["<s>", "▁a"], ["<s>", "▁a"], "t", quantity="scores", mask=mask,
                             show_mask=True, predicts=["▁a", "</s>"])
    z = np.asarray(fig.data[0].z, dtype=float)
    assert math.isnan(z[0, 1]) and z[1, 0] == 2.0
    assert fig.data[0].zmin == -3.0 and fig.data[0].zmax == 3.0            # symmetric around 0
    assert len(fig.data) == 2 and np.isnan(np.asarray(fig.data[1].z, dtype=float)[1]).all()
    assert list(fig.layout.yaxis.ticktext) == ["▁a", "&lt;/s&gt;"]       # rows: the token each step wrote
    no_mask = plots.head_heatmap(scores, ["<s>", "▁a"], ["<s>", "▁a"], "t", quantity="scores", mask=mask)
    assert len(no_mask.data) == 1


def test_grid_summary_alignment_and_bars():
    stack = np.random.default_rng(1).random((2, 3, 4, 5))
    grid = head_grid(stack, "g")
    assert len(grid.data) == 6 and grid.layout.annotations[4].text == "L2 H2"
    assert np.allclose(np.asarray(grid.data[4].z, dtype=float), np.round(stack[1, 1], 3))
    stat = plots.stat_heatmap(np.arange(6.0).reshape(2, 3), "entropy")
    assert np.array_equal(np.asarray(stat.data[0].z), np.arange(6.0).reshape(2, 3))
    a = word_alignment(np.array([[0.2, 0.8], [0.9, 0.1]]), ["▁x", "▁y"], ["▁p", "▁q"], drop_special=False)
    fig = plots.alignment_figure(a, "a")
    assert list(fig.data[1].x) == [1, 0] and list(fig.data[1].y) == [0, 1]
    bars = token_probs_figure(["▁<i>", "</s>"], [math.log(0.5), 0.0])
    assert np.allclose(bars.data[0].y, [0.5, 1.0]) and list(bars.layout.xaxis.ticktext) == ["▁&lt;i&gt;", "&lt;/s&gt;"]
    delta = plots.logprob_delta_figure(["a", "b"], [-1.0, -0.5], [-2.0, -0.5], "d")
    assert np.allclose(delta.data[0].y, [-1.0, 0.0])
