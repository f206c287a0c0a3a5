"""The Contributions page's figures (explorer.plots.contributions): a bar per output token at its source
share with the tokens under the threshold coloured apart, token x token heatmaps split at the source's
end, the curve over training; labels escaped once; what does not fit refused; a real tiny model's ALTI+
draws."""
from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.plots import contributions as plots
from explorer.plots import style


def shown(fig) -> str:
    return json.dumps(json.loads(fig.to_json()), ensure_ascii=False)


def test_the_bars_show_each_tokens_share_and_colour_those_under_the_threshold():
    tokens = ["1: <unk>", "2: a&b", "3: ▁x"]
    fig = plots.share_bars(tokens, [0.8, 0.2, 0.55], threshold=0.5)
    bar = fig.data[0]
    assert bar.orientation == "h"
    assert np.allclose(np.asarray(bar.x), [0.8, 0.2, 0.55])
    assert list(bar.marker.color) == [plots.BAR_COLOUR, plots.LOW_COLOUR, plots.BAR_COLOUR]
    assert list(bar.text) == ["80%", "20%", "55%"]
    assert list(fig.layout.yaxis.ticktext) == ["1: &lt;unk&gt;", "2: a&amp;b", "3: ▁x"]
    assert [s.x0 for s in fig.layout.shapes] == [0.5]                         # the threshold's line
    assert "threshold 50%" in shown(fig)
    plain = plots.share_bars(tokens, [0.8, 0.2, 0.55])
    assert set(plain.data[0].marker.color) == {plots.BAR_COLOUR} and not plain.layout.shapes
    assert fig.layout.height > plots.share_bars(tokens[:1], [0.1]).layout.height or fig.layout.height == plots.MIN_HEIGHT


def test_the_heatmap_keeps_the_matrix_and_splits_source_from_prefix():
    rng = np.random.default_rng(0)
    m = rng.dirichlet(np.ones(5), size=3)                                      # [T=3, S+T=5]
    rows, cols = ["1: <s>", "2: b", "3: c"], ["1: x", "2: y", "1: <start>", "2: b", "3: c"]
    fig = plots.contribution_heatmap(m, rows, cols, "t", n_src=2)
    heat = fig.data[0]
    assert np.allclose(np.asarray(heat.z), np.round(m, 4))
    assert heat.zmin == 0.0 and heat.zmax == pytest.approx(m.max())
    assert [s.x0 for s in fig.layout.shapes] == [1.5]                         # the line after the source
    assert {a.text for a in fig.layout.annotations} == {"source", "target prefix"}
    assert list(fig.layout.yaxis.ticktext)[0] == "1: &lt;s&gt;" and list(fig.layout.xaxis.ticktext)[2] == "1: &lt;start&gt;"
    assert "&amp;lt;" not in shown(fig)
    only_source = plots.contribution_heatmap(m[:, :2], rows, cols[:2], "t", quantity="weight")
    assert not only_source.layout.shapes
    assert plots.contribution_heatmap(np.zeros((1, 1)), ["a"], ["b"], "t").data[0].zmax == 1.0   # never an empty range
    scale = tuple(map(tuple, fig.data[0].colorscale))
    assert scale == tuple(map(tuple, style.head_grid(m[None, None], "t").update_layout(
        coloraxis_colorscale=style.WEIGHTS_SCALE).layout.coloraxis.colorscale))     # shares of 1: one scale app-wide


def test_the_curve_has_a_point_per_checkpoint_and_marks_the_current_one():
    fig = plots.share_curve(["epoch1", "final"], [289, 3757], [0.51, 0.64], current=1)
    line = fig.data[0]
    assert list(line.x) == [289, 3757] and np.allclose(line.y, [0.51, 0.64])
    assert list(fig.data[1].x) == [3757]
    unnumbered = plots.share_curve(["a", "<b>"], [None, 5], [0.5, 0.6])
    assert list(unnumbered.data[0].x) == [1, 2] and len(unnumbered.data) == 1
    assert list(unnumbered.data[0].text) == ["a", "&lt;b&gt;"]


def test_what_does_not_fit_is_refused():
    with pytest.raises(ValueError, match="shares need as many tokens"):
        plots.share_bars(["a"], [0.1, 0.2])
    with pytest.raises(ValueError, match="no output tokens"):
        plots.share_bars([], [])
    with pytest.raises(ValueError, match="labels"):
        plots.contribution_heatmap(np.ones((2, 3)), ["a", "b"], ["x", "y"], "t")
    with pytest.raises(ValueError, match="n_src"):
        plots.contribution_heatmap(np.ones((2, 3)), ["a", "b"], ["x", "y", "z"], "t", n_src=4)
    with pytest.raises(ValueError, match="must agree"):
        plots.share_curve(["a"], [1, 2], [0.5])


def test_a_real_sentences_contributions_draw():
    from explorer.studies.contributions import sentence_contributions
    from support.model_helpers import EOS, make_model

    model = make_model()
    sc = sentence_contributions(model, [5, 6, 7, EOS], [8, 9, EOS])
    out = [str(i) for i in sc.out_ids]
    bars = plots.share_bars(out, sc.source_share, threshold=float(np.median(sc.source_share)))
    assert np.allclose(np.asarray(bars.data[0].x), np.round(sc.source_share, 4))
    cols = [str(i) for i in sc.src_ids] + ["<start>"] + out[:-1]
    fig = plots.contribution_heatmap(sc.rollout[-1], out, cols, "t", n_src=sc.n_src)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3, 7) and np.allclose(z.sum(axis=1), 1.0, atol=1e-3)     # rows are distributions
    assert np.allclose(z[:, :4].sum(axis=1), sc.source_share, atol=1e-3)       # left of the line: the share
    cross = plots.contribution_heatmap(sc.cross_source[-1], out, cols[:4], "t")
    assert np.asarray(cross.data[0].z).shape == (3, 4)
