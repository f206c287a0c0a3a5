"""The Layers and Causes pages' figures (explorer.plots.lens, explorer.plots.patching): shapes, labels,
colours and the picked cell, from plain data and from a real logit lens and patching grids of a tiny model."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.plots import lens, patching, style


def shown(fig) -> str:
    return json.dumps(json.loads(fig.to_json()), ensure_ascii=False)


def fake_lens(n_layers=3, n_pos=4, k=2):
    rng = np.random.default_rng(0)
    top_lp = np.sort(np.log(rng.dirichlet(np.ones(6), size=(n_layers, n_pos))), axis=-1)[..., ::-1][..., :k]
    pieces = [[[f"<p{layer}{t}{j}>" for j in range(k)] for t in range(n_pos)] for layer in range(n_layers)]
    final_lp = top_lp[..., 0] - rng.random((n_layers, n_pos))
    ranks = rng.integers(1, 9, size=(n_layers, n_pos))
    return pieces, top_lp, final_lp, ranks


def test_the_lens_grid_has_a_row_per_position_and_a_column_per_layer():
    pieces, top_lp, final_lp, ranks = fake_lens()
    rows = [f"{t + 1}: ▁w{t}" for t in range(4)]
    fig = lens.lens_grid(pieces, top_lp, final_lp, ranks, ["a&b", "x", "y", "z"], rows, show="top")
    heat = fig.data[0]
    z = np.asarray(heat.z)
    assert z.shape == (4, 3)                                                 # positions down, layers across
    assert np.allclose(z, np.round(np.exp(top_lp[:, :, 0]).T, 4))            # the top piece's probability
    assert heat.text[2][1] == "&lt;p120&gt;"                                 # the cell's top piece, escaped once
    assert list(fig.layout.xaxis.ticktext) == ["layer 1", "layer 2", "layer 3 (output)"]
    assert list(fig.layout.yaxis.ticktext) == rows
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    assert "final token a&amp;b" in heat.customdata[0][0] and f"rank {ranks[0, 0]}" in heat.customdata[0][0]
    final = lens.lens_grid(pieces, top_lp, final_lp, ranks, ["a", "x", "y", "z"], rows, show="final")
    assert np.allclose(np.asarray(final.data[0].z), np.round(np.exp(final_lp).T, 4))
    assert "&amp;lt;" not in shown(fig) and "<p" not in shown(fig)


def test_the_lens_grid_refuses_what_does_not_fit():
    pieces, top_lp, final_lp, ranks = fake_lens()
    with pytest.raises(ValueError, match="show must be"):
        lens.lens_grid(pieces, top_lp, final_lp, ranks, list("abcd"), list("abcd"), show="nope")
    with pytest.raises(ValueError, match="labels"):
        lens.lens_grid(pieces, top_lp, final_lp, ranks, list("abcd"), list("abc"))


def test_a_real_logit_lens_draws():
    from explorer.studies.lens.logit_lens import logit_lens
    from support.model_helpers import make_model

    model = make_model()
    got = logit_lens(model, None, [5, 6, 7, 2], [8, 9, 2], top_k=3)
    fig = lens.lens_grid(got.top_pieces, got.top_logprobs, got.final_logprob, got.final_rank,
                         [str(i) for i in got.final_ids], ["a", "b", "c"])
    assert np.asarray(fig.data[0].z).shape == (3, model.cfg.n_decoder_layers)


def test_position_grids_are_signed_symmetric_and_outline_the_picked_cell():
    values = np.array([[0.0, 1.0, 0.2], [0.1, -0.4, 1.3]])
    fig = patching.position_grid(values, ["embeddings", "layer 1"], ["1: <a>", "2: b", "3: c"], "t",
                                 direction="noise", picked=(1, 2))
    heat = fig.data[0]
    assert np.asarray(heat.z).shape == (2, 3)
    assert heat.zmin == -1.3 and heat.zmax == 1.3                            # at least 1, more if a cell overshoots
    assert heat.colorscale == go.Heatmap(colorscale=style.SIGNED_SCALE).colorscale     # the page's signed scale
    assert list(fig.layout.xaxis.ticktext) == ["1: &lt;a&gt;", "2: b", "3: c"]
    assert list(fig.layout.yaxis.ticktext) == ["embeddings", "layer 1"]
    (box,) = fig.layout.shapes
    assert (box.x0, box.x1, box.y0, box.y1) == (1.5, 2.5, 0.5, 1.5)
    assert "destroyed" in fig.layout.title.text
    small = patching.position_grid(values * 0.1, ["a", "b"], ["1", "2", "3"], "t")
    assert small.data[0].zmax == 1.0 and not small.layout.shapes and "restored" in small.layout.title.text
    with pytest.raises(ValueError, match="direction"):
        patching.position_grid(values, ["a", "b"], ["1", "2", "3"], "t", direction="sideways")
    with pytest.raises(ValueError, match="labels"):
        patching.position_grid(values, ["a"], ["1", "2", "3"], "t")


def test_the_heads_grid_has_a_panel_per_kind_on_one_colour_axis():
    grids = {"encoder_heads": np.zeros((2, 4)), "decoder_heads": np.full((2, 4), 0.5),
             "cross_heads": np.array([[0, 0, 0, 0], [0.2, 0.1, -0.1, 2.0]])}
    titles = {"encoder_heads": "encoder self", "decoder_heads": "decoder self", "cross_heads": "cross"}
    fig = patching.heads_grid(grids, titles, picked=("cross_heads", 1, 3))
    assert len(fig.data) == 3 and all(np.asarray(t.z).shape == (2, 4) for t in fig.data)
    assert {t.coloraxis for t in fig.data} == {"coloraxis"}
    assert fig.layout.coloraxis.cmax == 2.0 and fig.layout.coloraxis.cmin == -2.0
    assert [a.text for a in fig.layout.annotations] == ["encoder self", "decoder self", "cross"]
    (box,) = fig.layout.shapes
    assert box.xref == "x3" and (box.x0, box.y0) == (2.5, 0.5)
    custom = np.asarray(fig.data[2].customdata)
    assert custom.shape == (2, 4, 2) and list(custom[1, 3]) == [2, 4]        # layer 2, head 4: 1-based in the hover


def test_the_changed_word_bars_have_one_bar_per_encoder_depth():
    fig = patching.changed_bars(np.array([[1.0], [0.98], [1.0]]), ["embeddings", "layer 1", "layer 2"], "▁one/▁two")
    assert list(fig.data[0].x) == ["embeddings", "layer 1", "layer 2"] and len(fig.data[0].y) == 3
    assert "▁one/▁two" in fig.layout.title.text


def test_real_patching_grids_draw():
    from explorer.studies.patching.grids import GRIDS, pair_grids
    from explorer.studies.patching.pair import MinimalPair
    from support.model_helpers import make_model

    model = make_model()

    def pair(clean, corrupt):
        return MinimalPair(clean_src=[5, 6, 7, 2], corrupt_src=[5, 9, 7, 2], changed=[1], prefix=[8],
                           clean_token=clean, corrupt_token=corrupt, clean_output=[8, clean, 2],
                           corrupt_output=[8, corrupt, 2])
    try:                                       # the token the clean run prefers must be the clean one
        result = pair_grids(model, pair(10, 11))
    except ValueError:
        result = pair_grids(model, pair(11, 10))
    enc = result.grids["encoder_resid"]["denoise"]
    fig = patching.position_grid(enc, [str(i) for i in range(enc.shape[0])], [str(i) for i in range(4)], "t")
    assert np.asarray(fig.data[0].z).shape == (model.cfg.n_encoder_layers + 1, 4)
    heads = {g: result.grids[g]["noise"] for g in GRIDS if g.endswith("_heads")}
    assert len(patching.heads_grid(heads, {g: g for g in heads}, "noise").data) == 3


def test_click_targets_cover_every_cell_once_and_carry_its_hover():
    values = np.arange(6, dtype=float).reshape(2, 3) / 10
    fig = patching.position_grid(values, ["a", "b"], ["1", "2", "3"], "t", clickable=True)
    heat, targets = fig.data
    assert heat.hoverinfo == "skip" and targets.type == "scatter"
    assert list(zip(targets.y, targets.x)) == [(r, c) for r in range(2) for c in range(3)]   # row-major
    assert targets.customdata[5][0].endswith("share restored (denoising): 0.500")            # row 2, column 3
    assert targets.marker.opacity == 0
    grids = {"encoder_heads": np.zeros((2, 4)), "cross_heads": np.ones((3, 4))}
    heads = patching.heads_grid(grids, {k: k for k in grids}, clickable=True)
    assert [t.type for t in heads.data] == ["heatmap", "heatmap", "scatter", "scatter"]
    assert heads.data[3].xaxis == "x2" and len(heads.data[3].x) == 12                        # panel 2's cells
    assert "layer 3, head 4" in heads.data[3].customdata[11][0]
