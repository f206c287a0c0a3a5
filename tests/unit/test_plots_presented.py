"""Figures as presenter mode draws them (explorer.plots.style.scale_text), and figure fixes a browser saw.

scale_text must grow every size a figure states by one factor (at least the minimum), grow its height
and margins with it, and leave the data and the sizes it does not state alone; a second figure type
(the beam tree's text, the head grid's annotations, stated tick fonts) each has its stated sizes
found. The token-probability bars carry colours, not numbers (plotly.js logged "Invalid color
specifier" for each number), and they are the colour scale's own colour at each probability.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.plots.architecture import bars_figure
from explorer.plots.style import PROBABILITY_SCALE, head_grid, scale_text, state_theme_sizes
from explorer.plots.training import schedule_figure
from explorer.plots.translation import token_probs_figure


def test_every_stated_size_grows_by_one_factor_with_a_floor():
    fig = go.Figure(go.Scatter(x=[0, 1], y=[2, 3], mode="markers+text", text=["a", "b"], textfont=dict(size=9),
                               marker=dict(size=7, colorbar=dict(tickfont=dict(size=12)))))
    fig.update_layout(height=300, margin=dict(l=10, r=20, t=40, b=0), title=dict(text="t", font=dict(size=20)),
                      xaxis=dict(tickfont=dict(size=11)), annotations=[dict(text="n", x=0, y=0, font=dict(size=14))])
    before = fig.to_plotly_json()
    out = scale_text(fig, 1.5, minimum=16)
    assert out is fig
    assert fig.data[0].textfont.size == 16                                      # 9 x 1.5 = 13.5: the floor
    assert fig.data[0].marker.colorbar.tickfont.size == 18
    assert fig.layout.title.font.size == 30 and fig.layout.xaxis.tickfont.size == 16.5
    assert fig.layout.annotations[0].font.size == 21
    assert fig.layout.height == 450 and tuple(fig.layout.margin[s] for s in "lrtb") == (15, 30, 60, 0)
    assert fig.data[0].marker.size == 7                                         # a marker is no text
    assert list(fig.data[0].x) == before["data"][0]["x"] and list(fig.data[0].y) == before["data"][0]["y"]
    assert fig.layout.font.size is None                                         # unstated: the theme's


def test_a_factor_of_one_and_no_floor_changes_nothing():
    fig = head_grid(np.random.default_rng(0).random((2, 3, 4, 4)), "g")
    before = fig.to_plotly_json()
    scale_text(fig, 1.0)
    assert fig.to_plotly_json() == before


def test_the_head_grid_and_bars_have_their_stated_sizes_found():
    grid = scale_text(head_grid(np.random.default_rng(0).random((2, 3, 4, 4)), "g"), 22 / 16, 16)
    assert {a.font.size for a in grid.layout.annotations} == {16}               # 10 px "L1 H1" labels
    assert len(grid.data) == 6 and grid.layout.height == round((70 + 140 * 2) * 22 / 16)
    bars = scale_text(bars_figure(["a"], [1.0], "t", "y"), 2.0)
    assert bars.layout.height == 760


SIZES = {"text": 16.5, "axis_title": 19.25, "title": 22.0}


def test_every_size_left_to_the_theme_is_stated_and_stated_ones_kept():
    """A chart drawn before presenter mode's style sheet applies takes the theme's sizes at the laptop's type
    size: every text size the theme would fill in is stated instead, on every axis of every subplot."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3)
    for col in (1, 2, 3):
        fig.add_trace(go.Heatmap(z=[[0, 1], [1, 0]]), row=1, col=col)
    fig.update_layout(xaxis2=dict(tickfont=dict(size=30)), showlegend=True)
    state_theme_sizes(fig, SIZES)
    axes = [fig.layout[f"{a}axis{n}"] for a in "xy" for n in ("", "2", "3")]
    assert [ax.tickfont.size for ax in axes] == [16.5, 30, 16.5, 16.5, 16.5, 16.5]
    assert {ax.title.font.size for ax in axes} == {19.25}
    assert fig.layout.font.size == 16.5 and fig.layout.legend.font.size == 16.5
    assert fig.layout.hoverlabel.font.size == 16.5 and fig.layout.title.font.size == 22
    assert fig.layout.coloraxis.colorbar.tickfont.size == 16.5
    before = fig.to_plotly_json()
    assert state_theme_sizes(fig, SIZES).to_plotly_json() == before            # stated now: kept


def test_a_figure_with_one_default_axis_gets_its_axes_stated():
    fig = state_theme_sizes(go.Figure(go.Bar(x=["a"], y=[1])), SIZES)
    assert fig.layout.xaxis.tickfont.size == 16.5 and fig.layout.yaxis.title.font.size == 19.25


def test_token_probability_bars_carry_the_scales_colours():
    lp = [math.log(0.5), 0.0, math.log(0.05)]
    fig = token_probs_figure(["a", "b", "c"], lp)
    colours = list(fig.data[0].marker.color)
    assert all(isinstance(c, str) and c.startswith("rgb(") for c in colours)
    assert colours == sample_colorscale(PROBABILITY_SCALE, [0.5, 1.0, 0.05])
    assert colours[1] != colours[2]                                             # sure and unsure differ


def test_the_schedule_figures_own_curve_is_on_top_of_an_equal_reference():
    """The page's own curve (first) is drawn last, solid and wider, and listed first; the references
    are dashed: with the default settings "yours" equals the paper's 512/4000 and was hidden under it."""
    steps = np.arange(1, 101)
    curve = 512 ** -0.5 * np.minimum(steps ** -0.5, steps * 40.0 ** -1.5)
    fig = schedule_figure([("yours", steps, curve), ("512/40", steps, curve), ("256/40", steps, 2 * curve)],
                          actual=(steps[:3], curve[:3]))
    names = [t.name for t in fig.data]
    assert names[-2:] == ["yours", "logged by the run"]                     # on top of both references
    assert sorted(names, key=lambda n: fig.data[names.index(n)].legendrank) == [
        "yours", "512/40", "256/40", "logged by the run"]                       # the legend's order
    own, refs = fig.data[names.index("yours")], [fig.data[names.index(n)] for n in ("512/40", "256/40")]
    assert own.line.dash is None and all(r.line.dash == "dash" and r.line.width < own.line.width for r in refs)
    assert np.array_equal(own.y, curve) and np.array_equal(refs[1].y, 2 * curve)
