"""Figures of the Attention page: pure builders, numpy in, plotly Figure out (no Streamlit).

Tokens go on numeric axes with tick labels (a sentence often repeats a token, and a categorical
axis would merge the repeats), and every token is HTML-escaped first: plotly renders a subset of
HTML in labels and hover text, so `<s>` would vanish and `<b>` would turn bold.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.inspection.attention_stats import STAT_LABELS, Alignment

WEIGHTS_SCALE = "Blues"
SCORES_SCALE = "RdBu_r"
MASK_COLOUR = "rgba(120,120,120,0.55)"
LABEL_PX = 7            # about the width of one tick-label character at plotly's default 12 px font
UPRIGHT_KEYS = 12       # more key tokens than this: their labels are drawn vertically


def label(token: str) -> str:
    """A token as safe plotly text (escaped; the sentencepiece marker kept, it shows word starts)."""
    return html.escape(str(token), quote=False)


def token_axis(tokens: Sequence[str]) -> dict:
    return dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=[label(t) for t in tokens])


def _finite(matrix: np.ndarray) -> np.ndarray:
    """-inf (masked scores) -> NaN, which plotly leaves blank instead of failing to serialise."""
    m = np.asarray(matrix, dtype=np.float64)
    return np.where(np.isfinite(m), m, np.nan)


def head_grid(stack: np.ndarray, title: str, diverging: bool = False) -> go.Figure:
    """Layers down, heads across: one small heatmap per head of a stack [L, H, q, k].

    Kept light, because it is redrawn on every change: the axes are laid out by hand (plotly's
    make_subplots + add_trace costs ~0.1 s of CPU for 12 heads; this ~10 ms), values are rounded
    to 3 decimals and sent as float32, no tick labels, one shared colour axis.
    """
    stack = _finite(stack)                                                    # [L, H, q, k]
    n_layers, n_heads = stack.shape[:2]
    gap_x, gap_y = 0.01, 0.12 / max(n_layers, 1)
    data, layout, titles = [], {}, []
    for layer in range(n_layers):
        top = 1 - layer / n_layers
        for head in range(n_heads):
            i = layer * n_heads + head + 1
            data.append(dict(type="heatmap", z=np.round(stack[layer, head], 3).astype(np.float32),
                             xaxis=f"x{i}", yaxis=f"y{i}", coloraxis="coloraxis",
                             hovertemplate=f"layer {layer + 1}, head {head + 1}<br>query %{{y}} → key %{{x}}: "
                                           "%{z:.3f}<extra></extra>"))
            x0, x1 = head / n_heads + gap_x, (head + 1) / n_heads - gap_x
            layout[f"xaxis{i}"] = dict(domain=[x0, x1], anchor=f"y{i}", showticklabels=False, ticks="",
                                       showgrid=False, zeroline=False)
            layout[f"yaxis{i}"] = dict(domain=[top - 1 / n_layers + gap_y / 2, top - gap_y], anchor=f"x{i}",
                                       showticklabels=False, ticks="", showgrid=False, zeroline=False,
                                       autorange="reversed")
            titles.append(dict(text=f"L{layer + 1} H{head + 1}", x=(x0 + x1) / 2, y=top - gap_y, xref="paper",
                               yref="paper", xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=10)))
    finite = stack[np.isfinite(stack)]
    if diverging and finite.size:
        limit = float(np.abs(finite).max()) or 1.0
        coloraxis = dict(colorscale=SCORES_SCALE, cmin=-limit, cmax=limit)
    else:
        coloraxis = dict(colorscale=WEIGHTS_SCALE, cmin=0.0)
    fig = go.Figure(data=data, layout=dict(layout, title=title, coloraxis=coloraxis, annotations=titles,
                                           height=70 + 140 * n_layers, margin=dict(l=10, r=10, t=60, b=10)))
    return fig


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
    z = _finite(matrix)                                                       # [q, k]
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
    finite = z[np.isfinite(z)]
    limit = float(np.abs(finite).max()) if finite.size else 1.0
    colour = dict(colorscale=SCORES_SCALE, zmid=0.0) if scores else dict(colorscale=WEIGHTS_SCALE, zmin=0.0)
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
    upright = k > UPRIGHT_KEYS                                                # key labels drawn vertically
    left = 45 + LABEL_PX * max((len(str(t)) for t in y_labels), default=1)
    bottom = 45 + (LABEL_PX * max((len(str(t)) for t in k_tokens), default=1) if upright else 20)
    fig.update_layout(title=title, height=(height or side) + bottom, margin=dict(l=left, r=10, t=50, b=bottom),
                      xaxis=dict(title="key", automargin=False, tickangle=-90 if upright else 0,
                                 **token_axis(k_tokens)),
                      yaxis=dict(title=y_title, autorange="reversed", automargin=False, **token_axis(y_labels)))
    if scores and finite.size:
        fig.data[0].update(zmin=-limit, zmax=limit)
    return fig


def stat_heatmap(values: np.ndarray, stat: str, title: str | None = None) -> go.Figure:
    """A [L, H] table of one head statistic as a heatmap with the numbers written in."""
    values = _finite(values)
    n_layers, n_heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(1, n_heads + 1)), y=list(range(1, n_layers + 1)), colorscale="Viridis",
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
