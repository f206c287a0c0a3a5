"""Figures of the Attention page: pure builders, numpy in, plotly Figure out (no Streamlit).

Colours, token labels and the all-heads grid come from explorer.plots.style, shared with every page.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.inspection.attention_stats import STAT_LABELS, Alignment
from explorer.plots.style import (MASK_COLOUR, SEQUENTIAL_SCALE, SIGNED_SCALE, WEIGHTS_SCALE, finite, label,
                                  signed_range, token_axis)

LABEL_PX = 7            # about the width of one tick-label character at plotly's default 12 px font
NARROW_PX = 240         # a heatmap beside another on a laptop: key labels longer than this together are drawn
                        # vertically (side by side they would run into each other)


def head_heatmap(matrix: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str, *,
                 quantity: str = "weights", mask: np.ndarray | None = None, show_mask: bool = False,
                 predicts: Sequence[str] | None = None, height: int | None = None) -> go.Figure:
    """One head, large: queries down, keys across, tokens on both axes, values on hover.

    quantity "weights" (after softmax, 0..1), "scores" (before softmax, diverging around 0;
    masked cells are -inf and left blank) or "difference" (a change in weights, diverging). With
    show_mask, cells where mask is True are covered in grey. `predicts`, for decoder-side queries,
    names the output token each position wrote: rows are then labelled by it (the step that wrote
    "und" looks at the source), with the decoder input on hover.
    """
    z = finite(matrix)                                                        # [q, k]
    q, k = z.shape
    if (q, k) != (len(q_tokens), len(k_tokens)):
        raise ValueError(f"matrix {z.shape} does not match {len(q_tokens)} x {len(k_tokens)} tokens")
    inputs = [label(t) for t in q_tokens]
    rows = inputs if predicts is None else [f"writes {label(p)} (input {i})" for i, p in zip(inputs, predicts)]
    custom = np.empty((q, k, 2), dtype=object)
    custom[:, :, 0] = np.array(rows, dtype=object)[:, None]
    custom[:, :, 1] = np.array([label(t) for t in k_tokens], dtype=object)[None, :]
    scores = quantity in ("scores", "difference")
    value = {"scores": "score", "difference": "Δ weight"}.get(quantity, "weight")
    colour = dict(colorscale=SIGNED_SCALE, zmid=0.0) if scores else dict(colorscale=WEIGHTS_SCALE, zmin=0.0)
    fig = go.Figure(go.Heatmap(
        z=z, customdata=custom, colorbar=dict(title=value), **colour,
        hovertemplate="query %{y}: %{customdata[0]}<br>key %{x}: %{customdata[1]}<br>"
                      + value + " %{z:.4f}<extra></extra>"))
    if show_mask and mask is not None and np.asarray(mask).any():
        covered = np.where(np.asarray(mask, dtype=bool), 1.0, np.nan)
        fig.add_trace(go.Heatmap(z=covered, colorscale=[[0, MASK_COLOUR], [1, MASK_COLOUR]], showscale=False,
                                 hovertemplate="masked: key %{x} is after query %{y}<br>"
                                               "score set to −∞, weight 0<extra></extra>"))
    side = max(320, min(900, 110 + 24 * max(q, k)))
    y_title = "query" if predicts is None else "query (step that writes)"
    y_labels = q_tokens if predicts is None else predicts
    upright = LABEL_PX * sum(len(str(t)) + 1 for t in k_tokens) > NARROW_PX   # key labels drawn vertically
    left = 45 + LABEL_PX * max((len(str(t)) for t in y_labels), default=1)
    bottom = 45 + (LABEL_PX * max((len(str(t)) for t in k_tokens), default=1) if upright else 20)
    fig.update_layout(title=title, height=(height or side) + bottom, margin=dict(l=left, r=10, t=50, b=bottom),
                      xaxis=dict(title="key", automargin=False, tickangle=-90 if upright else 0,
                                 **token_axis(k_tokens)),
                      yaxis=dict(title=y_title, autorange="reversed", automargin=False, **token_axis(y_labels)))
    if scores and np.isfinite(z).any():
        fig.data[0].update(zmin=-signed_range(z), zmax=signed_range(z))
    return fig


def stat_heatmap(values: np.ndarray, stat: str, title: str | None = None) -> go.Figure:
    """A [L, H] table of one head statistic as a heatmap with the numbers written in."""
    values = finite(values)
    n_layers, n_heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(1, n_heads + 1)), y=list(range(1, n_layers + 1)), colorscale=SEQUENTIAL_SCALE,
        texttemplate="%{z:.2f}", colorbar=dict(title=STAT_LABELS.get(stat, stat)),
        hovertemplate="layer %{y}, head %{x}<br>" + STAT_LABELS.get(stat, stat) + " %{z:.3f}<extra></extra>"))
    fig.update_layout(title=title or STAT_LABELS.get(stat, stat), height=120 + 45 * n_layers,
                      margin=dict(l=10, r=10, t=50, b=10),
                      xaxis=dict(title="head", dtick=1), yaxis=dict(title="layer", dtick=1, autorange="reversed"))
    return fig


def alignment_figure(alignment: Alignment, title: str) -> go.Figure:
    """Word alignment: target words down, source words across; a dot on each word's strongest link."""
    m = alignment.matrix
    fig = go.Figure(go.Heatmap(
        z=np.round(m, 4), colorscale=WEIGHTS_SCALE, zmin=0.0, colorbar=dict(title="attention"),
        hovertemplate="target word %{y} → source word %{x}: %{z:.3f}<extra></extra>"))
    if alignment.links:
        t, s = zip(*alignment.links)
        fig.add_trace(go.Scatter(x=list(s), y=list(t), mode="markers", name="strongest link",
                                 marker=dict(symbol="circle-open", size=14, color="crimson", line=dict(width=2)),
                                 hovertemplate="link: target %{y} → source %{x}<extra></extra>"))
    n = max(m.shape) if m.size else 1
    fig.update_layout(title=title, height=max(300, min(800, 90 + 26 * n)), showlegend=False,
                      margin=dict(l=10, r=10, t=50, b=10),
                      xaxis=dict(title="source word", automargin=True, **token_axis(alignment.src_words)),
                      yaxis=dict(title="target word", autorange="reversed", **token_axis(alignment.tgt_words)))
    return fig


def logprob_delta_figure(pieces: Sequence[str], before: Sequence[float], after: Sequence[float],
                         title: str) -> go.Figure:
    """Per output token: how much its log-probability changed when heads were switched off."""
    before_a, after_a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    delta = after_a - before_a
    x = list(range(len(pieces)))
    fig = go.Figure(go.Bar(
        x=x, y=delta, marker_color=np.where(delta < 0, "crimson", "seagreen"),
        customdata=np.stack([np.exp(before_a), np.exp(after_a)], axis=1),
        hovertext=[label(p) for p in pieces],
        hovertemplate="%{hovertext}<br>p before %{customdata[0]:.3f}, after %{customdata[1]:.3f}"
                      "<br>Δ log-prob %{y:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=320, margin=dict(l=10, r=10, t=50, b=10),
                      yaxis_title="Δ log-probability", xaxis=dict(**token_axis(pieces)))
    return fig
