"""Figure builders and math of the Positional-encoding and Beam-search pages, on their data.

The figures must show the model's own numbers: the heatmap is the table the model adds, the tree
has exactly one node per candidate the search ranked, and its best path is the returned best.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.inspection import positions as pe
from explorer.config import DecodeConfig
from explorer.decoding import EOS_ID, beam_search
from explorer.decoding.beam_trace import KEPT, STATUSES
from explorer.inspection.hooks import capture
from explorer.model import sinusoidal_table
from explorer.plots import beams as bplots
from explorer.plots import positions as pplots
from support.decoding_helpers import random_model
from support.numerics import EPS32

SOURCES = [[5, 9, 11, 7, EOS_ID], [4, 4, 8, 19, 6, 12, EOS_ID]]


# ---------------------------------------------------------------------------------- positions

@pytest.mark.parametrize("d_model, base", [(64, 10000.0), (128, 1000.0), (30, 100.0)])
def test_pe_heatmap_shows_the_models_table(d_model, base):
    table = pe.sinusoidal(50, d_model, base)
    expected = sinusoidal_table(50, d_model, base).numpy()
    assert np.array_equal(table, expected)
    fig = pplots.pe_heatmap(table)
    assert np.array_equal(np.asarray(fig.data[0].z), expected)
    assert list(fig.data[0].x) == list(range(d_model)) and list(fig.data[0].y) == list(range(50))


def test_base_changes_the_table():
    assert not np.allclose(pe.sinusoidal(40, 64, 10000.0), pe.sinusoidal(40, 64, 1000.0))


def test_wavelengths_are_periods_of_the_table():
    d, base = 32, 1000.0
    waves = pe.wavelengths(d, base)
    assert waves[0] == pytest.approx(2 * math.pi)
    assert waves[-1] == pytest.approx(2 * math.pi * base ** ((d - 2) / d))
    assert np.allclose(np.diff(np.log(waves)), np.log(base) * 2 / d)          # geometric progression
    table = sinusoid = pe.sinusoidal(200, d, base)
    pos = np.arange(200)
    for i in (0, 3, 7):
        assert np.allclose(sinusoid[:, 2 * i], np.sin(2 * math.pi * pos / waves[i]), atol=1e-5)
        assert np.allclose(table[:, 2 * i + 1], np.cos(2 * math.pi * pos / waves[i]), atol=1e-5)
    assert np.array_equal(pe.dimension_wavelengths(d, base)[[0, 1, 6, 7]], waves[[0, 0, 3, 3]])


def test_halves_layout_wavelengths_are_periods_of_its_table():
    """Marian's layout: dim i is the sine of frequency i, dim d/2 + i its cosine."""
    d, base = 32, 1000.0
    waves, table = pe.wavelengths(d, base), pe.sinusoidal(200, d, base, layout="halves")
    pos = np.arange(200)
    for i in (0, 3, 7):
        assert np.allclose(table[:, i], np.sin(2 * math.pi * pos / waves[i]), atol=1e-5)
        assert np.allclose(table[:, d // 2 + i], np.cos(2 * math.pi * pos / waves[i]), atol=1e-5)
    dims = pe.dimension_wavelengths(d, base, layout="halves")
    assert np.array_equal(dims[[0, 3, d // 2, d // 2 + 3]], waves[[0, 3, 0, 3]])
    assert pe.dimension_wavelengths(7, base, layout="halves").shape == (7,)


def test_similarity_depends_only_on_the_offset():
    d, base, n = 64, 10000.0, 60
    sim = pe.similarity(pe.sinusoidal(n, d, base))
    profile = pe.offset_profile(d, base, n - 1)
    offsets = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    assert np.allclose(sim, profile[offsets], atol=1e-4)
    assert np.allclose(np.diag(sim), d / 2, atol=1e-4)                           # ||PE(p)||^2 = d/2
    fig = pplots.similarity_heatmap(sim)
    assert np.allclose(np.asarray(fig.data[0].z), sim)
    # the axes hold exactly the positions: a square plot area, not an x range padded to the page's width
    assert tuple(fig.layout.xaxis.range) == (-0.5, n - 0.5) and tuple(fig.layout.yaxis.range) == (n - 0.5, -0.5)
    assert fig.layout.xaxis.constrain == fig.layout.yaxis.constrain == "domain" and fig.layout.yaxis.scaleanchor == "x"
    with pytest.raises(ValueError):
        pe.offset_profile(31, base, 5)


def test_bad_table_arguments_raise_clearly():
    with pytest.raises(ValueError, match="base"):
        pe.sinusoidal(10, 16, 1.0)
    with pytest.raises(ValueError, match="n_positions"):
        pe.sinusoidal(0, 16, 10000.0)


def test_embedding_norms_read_the_capture_points():
    model = random_model()
    ids = torch.tensor([[5, 9, 11, EOS_ID]])
    with capture(model, "encoder.embed.*") as trace:
        model.encode(ids)
    tok, pos = pe.embedding_norms(trace, "encoder")
    lookup = model.encoder.embed.lookup.weight.detach()[ids[0]]                # [T, d]
    d = model.cfg.d_model
    # float32 norms: sums of d squares, all positive, so each within d eps of itself in any order
    assert np.allclose(tok, (lookup * math.sqrt(d)).norm(dim=-1).numpy(), rtol=d * EPS32, atol=0)
    assert np.allclose(pos, math.sqrt(d / 2), rtol=d * EPS32, atol=0)
    fig = pplots.norm_bars(["a", "</s>", "c", "d"], tok, pos)
    assert [t.name for t in fig.data] == ["‖√d · E[token]‖", "‖PE(position)‖"]
    assert "&lt;/s&gt;" in fig.data[0].x[1]                                   # escaped for plotly


def test_learned_table_only_for_learned_positions():
    assert pe.learned_table(random_model(), "encoder") is None
    model = random_model(positions="learned")
    table = pe.learned_table(model, "decoder")
    assert np.array_equal(table, model.decoder.embed.position_table.weight.detach().numpy())
    table[0, 0] = 123.0                                                        # a copy, not the weights
    assert model.decoder.embed.position_table.weight[0, 0].item() != 123.0


def test_curves_and_wavelength_figures():
    table = pe.sinusoidal(30, 16, 10000.0)
    fig = pplots.dimension_curves(table, [0, 5], pe.dimension_wavelengths(16))
    assert len(fig.data) == 2 and np.allclose(fig.data[1].y, table[:, 5])
    waves = pe.wavelengths(16)
    fig = pplots.wavelength_figure(waves, 10000.0, 16)
    assert np.allclose(fig.data[0].y, waves)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick == 1       # decades only, no small "2" "5"


# -------------------------------------------------------------------------------------- beams

@pytest.fixture(scope="module")
def traces():
    model = random_model(seed=3)
    cfg = DecodeConfig(beam_size=3, max_len_b=6, trace_top_k=4)
    free = beam_search(model, SOURCES, cfg, trace=True)
    forced = beam_search(model, SOURCES[:1], cfg, prefix=[7, 9], trace=True)
    return [d.trace for d in free] + [forced[0].trace]


def _node_rows(fig) -> np.ndarray:
    nodes = [t for t in fig.data if t.name in STATUSES]
    return np.concatenate([np.asarray(t.customdata)[:, 0] for t in nodes]).astype(int)


def test_parent_rows_follow_the_trace_paths(traces):
    for trace in traces:
        parents, cand = trace.parent_rows(), trace.candidates
        for row in range(len(cand)):
            path = trace.path(row)
            assert parents[row] == (path[-2] if len(path) > 1 else -1)
            assert len(path) == cand["step"][row] + 1                         # one row per step, from step 0
            if parents[row] >= 0:                                             # the slot the row names, a step back
                assert trace.status(parents[row]) in ("kept", "forced")
                assert cand["step"][parents[row]] == cand["step"][row] - 1
                assert cand["slot"][parents[row]] == cand["parent"][row]


def test_tree_has_one_node_per_hypothesis(traces):
    piece = lambda t: f"t{t}"                                                 # noqa: E731
    for trace in traces:
        fig = bplots.tree_figure(trace, piece, step=1)
        rows = _node_rows(fig)
        assert sorted(rows.tolist()) == list(range(len(trace.candidates)))
        cand = trace.candidates
        for t in fig.data:
            if t.name in STATUSES:                                           # colour by status
                custom = np.asarray(t.customdata)
                rows = custom[:, 0].astype(int)
                assert all(trace.status(r) == t.name for r in rows)
                expected = np.stack([rows, cand["step"][rows] + 1, cand["rank"][rows], cand["token_logprob"][rows],
                                     cand["score"][rows], cand["normalized"][rows]], axis=1)
                assert np.allclose(custom, expected, equal_nan=True)       # what the hover shows
        x, _ = bplots.tree_layout(trace)
        assert np.array_equal(x, trace.candidates["step"] + 1)


def test_tree_highlights_the_best_path(traces):
    for trace in traces:
        best = trace.best_path()
        assert best == trace.path(int(trace.final[0])) and best[-1] == int(trace.final[0])
        fig = bplots.tree_figure(trace, lambda t: str(t))
        line = next(t for t in fig.data if t.name == "best path")
        x, y = bplots.tree_layout(trace)
        drawn = [(a, b) for a, b in zip(line.x, line.y) if a is not None]
        assert set(drawn) == {(0.0, 0.0)} | {(x[r], y[r]) for r in best}
        big = {int(r) for t in fig.data if t.name in STATUSES
               for r, size in zip(np.asarray(t.customdata)[:, 0], t.marker.size) if size > 8}
        assert big == set(best)


def test_the_tree_legend_is_one_row_above_the_tree(traces):
    """Its node statuses share a legend group, which a horizontal legend stacks in a column: three rows in
    the top margin, cut at the figure's top and under Plotly's toolbar on a projector. One row, in order."""
    for trace in traces:
        fig = bplots.tree_figure(trace, lambda t: f"t{t}")
        grouped = {t.legendgroup for t in fig.data if t.showlegend is not False and t.legendgroup}
        legend = fig.layout.legend
        assert legend.orientation == "h" and legend.yanchor == "bottom" and legend.y >= 1
        assert not grouped or legend.traceorder == "normal"                 # a group would stack


def _labels(fig) -> dict[int, tuple[str, str]]:
    """row -> (its label, where it sits) for every node the tree writes a token on."""
    return {int(r): (text, side) for t in fig.data if t.name in STATUSES
            for r, text, side in zip(np.asarray(t.customdata)[:, 0], t.text, t.textposition) if text}


def test_tree_labels_of_neighbouring_steps_do_not_share_a_line(traces):
    """A label is wider than a step: two at the same height one step apart ran into one another
    ("▁said▁to▁him") on a projector, so neighbours sit on opposite sides of their nodes, each row has
    room for a node and its label, and the step axis spans BOS (0) to the last step, no tick beyond."""
    for trace in traces:
        fig = bplots.tree_figure(trace, lambda t: f"t{t}")
        x, y = bplots.tree_layout(trace)
        labels, best = _labels(fig), set(trace.best_path())
        expected = {r for r in range(len(x)) if r in best or trace.status(r) != "pruned"}
        assert set(labels) == expected                                      # pruned ones: on hover only
        for a in labels:
            for b in labels:
                if y[a] == y[b] and x[b] == x[a] + 1:
                    assert labels[a][1] != labels[b][1]
        lo, hi = fig.layout.xaxis.range
        assert -1 < lo < 0 and trace.n_steps < hi < trace.n_steps + 1   # no -1, no step after the last
        busiest = max(len(trace.step_rows(s)) for s in range(trace.n_steps))
        assert fig.layout.height >= min(bplots.TREE_ROW_PX * busiest, bplots.TREE_MAX_HEIGHT - 120)


def test_a_long_search_labels_its_best_path_only():
    """Past TREE_LABELLED_STEPS steps the kept candidates' labels crowd even when staggered: the best
    path keeps its labels, the others are on hover, and the subtitle says so."""
    def searched(steps):              # the random model never ends early: it runs to the length limit
        cfg = DecodeConfig(beam_size=3, max_len_a=0, max_len_b=steps, trace_top_k=4)
        return beam_search(random_model(seed=0), SOURCES[:1], cfg, trace=True)[0].trace

    long, short = searched(bplots.TREE_LABELLED_STEPS + 5), searched(bplots.TREE_LABELLED_STEPS)
    assert long.n_steps > bplots.TREE_LABELLED_STEPS >= short.n_steps
    fig = bplots.tree_figure(long, lambda t: f"t{t}")
    assert set(_labels(fig)) == set(long.best_path()) and len(long.best_path()) == long.n_steps
    assert "best path only" in fig.layout.title.subtitle.text
    assert len(_node_rows(fig)) == len(long.candidates)                   # every node still drawn
    fig = bplots.tree_figure(short, lambda t: f"t{t}")
    assert len(_labels(fig)) > len(short.best_path()) and not fig.layout.title.subtitle.text


def test_forced_prefix_is_the_trunk(traces):
    forced = traces[-1]
    rows = np.flatnonzero(forced.candidates["status"] == STATUSES.index("forced"))
    assert forced.tokens(int(forced.final[0]))[:2] == [7, 9] and len(rows) == 2
    assert forced.parent_rows()[rows[1]] == rows[0]


def test_step_table_lists_that_steps_candidates(traces):
    trace = traces[0]
    piece = lambda t: f"t{t}"                                                 # noqa: E731
    for step in range(trace.n_steps):
        table = bplots.step_table(trace, step, piece)
        at = trace.at_step(step)
        assert len(table) == len(at) == 2 * trace.beam_size
        assert table["token"].tolist() == [f"t{t}" for t in at["token"]]
        assert np.allclose(table["cumulative"], at["score"]) and np.allclose(table["normalised"], at["normalized"])
        assert table["status"].tolist() == [STATUSES[s] for s in at["status"]]
        for _, r in table.iterrows():
            expected = " ".join(piece(t) for t in trace.tokens(int(r["row"]))[:-1]) or "<s>"
            assert r["extends"] == expected
    assert not bplots.step_table(trace, 0, piece).equals(bplots.step_table(trace, 1, piece))


def test_alternatives_include_the_rows_own_token(traces):
    trace = traces[0]
    kept = np.flatnonzero(trace.candidates["status"] == KEPT)
    for row in kept[:6]:
        alts = trace.alternatives_for(int(row))
        tokens = [t for t, _ in alts]
        assert int(trace.candidates["token"][row]) in tokens
        lps = [lp for _, lp in alts]
        assert lps == sorted(lps, reverse=True) and len(set(tokens)) == len(tokens)


def test_attention_figures_and_escaping():
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))    # [H=2, T=3, S=4]
    fig = bplots.step_attention_figure(weights[:, -1], ["a", "<b>", "c", "</s>"], "t")
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3, 4) and np.allclose(z[-1], weights[:, -1].mean(axis=0))
    assert "&lt;b&gt;" in fig.data[0].x[1] and "<b>" not in fig.data[0].x[1]
    assert fig.data[0].x[0] == "1: a"                                            # positions count from 1
    fig = bplots.prefix_attention_figure(weights.mean(axis=0), list("abcd"), ["x", "y", "</s>"], "t")
    assert np.asarray(fig.data[0].z).shape == (3, 4)
    assert (fig.data[0].x[0], fig.data[0].y[0]) == ("1: a", "1: x")
    bars = pplots.norm_bars(["a", "b"], np.ones(2), np.ones(2))
    assert list(bars.data[0].x) == ["1: a", "2: b"]
    assert bplots.label("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
