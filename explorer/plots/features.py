"""The Features page's figures: the strongest features at each position of a sentence, a feature's
activation histogram over the training pairs, the tokens it raises and lowers, and its activation at its
contexts across a run's checkpoints.

Pure builders: plain data in (numpy arrays, lists), plotly Figure out, no Streamlit; every piece is
HTML-escaped once (explorer.plots.style.label).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.contributions import BAR_COLOUR, LOW_COLOUR
from explorer.plots.style import SEQUENTIAL_SCALE, SIGNED_SCALE, label

COL_PX, MIN_WIDTH = 64, 420


def position_features(features: np.ndarray, values: np.ndarray, positions: Sequence[str], title: str) -> go.Figure:
    """features, values [L, k] (feature -1: none fired there): positions across, the k strongest features
    down, each cell naming its feature and coloured by its activation."""
    feats, vals = np.asarray(features), np.asarray(values, dtype=np.float64)
    if feats.shape != vals.shape or feats.shape[0] != len(positions):
        raise ValueError(f"features {feats.shape} and values {vals.shape} for {len(positions)} positions")
    n_pos, k = feats.shape
    text = [[f"#{feats[t, r]}" if feats[t, r] >= 0 else "" for t in range(n_pos)] for r in range(k)]
    hover = [[f"{label(positions[t])}<br>feature #{feats[t, r]}: {vals[t, r]:.3f}" if feats[t, r] >= 0
              else f"{label(positions[t])}<br>(no feature)" for t in range(n_pos)] for r in range(k)]
    fig = go.Figure(go.Heatmap(
        z=np.round(vals.T, 4), x=list(range(n_pos)), y=list(range(k)), text=text, texttemplate="%{text}",
        textfont=dict(size=11), customdata=np.array(hover, dtype=object), colorscale=SEQUENTIAL_SCALE, zmin=0.0,
        colorbar=dict(title=dict(text="activation", font=dict(size=12))),
        hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2))
    fig.update_xaxes(tickmode="array", tickvals=list(range(n_pos)), ticktext=[label(p) for p in positions],
                     tickangle=-45)
    fig.update_yaxes(tickmode="array", tickvals=list(range(k)), ticktext=[f"{r + 1}." for r in range(k)],
                     autorange="reversed", title=dict(text="strongest features", font=dict(size=12)))
    fig.update_layout(title=dict(text=title), height=200 + 34 * k, margin=dict(l=10, r=10, t=60, b=10))
    return fig


def histogram(edges: np.ndarray, counts: np.ndarray, title: str) -> go.Figure:
    """counts [B] of a feature's non-zero activations in the bins between edges [B + 1]."""
    edges, counts = np.asarray(edges, dtype=np.float64), np.asarray(counts)
    if len(edges) != len(counts) + 1:
        raise ValueError(f"{len(counts)} bins need {len(counts) + 1} edges, not {len(edges)}")
    centres, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    fig = go.Figure(go.Bar(x=centres, y=counts, width=widths, marker_color="#4c78a8",
                           customdata=np.stack([edges[:-1], edges[1:]], axis=1),
                           hovertemplate="%{customdata[0]:.3f} to %{customdata[1]:.3f}: %{y} positions<extra></extra>"))
    fig.update_xaxes(title=dict(text="activation (where it fired)", font=dict(size=12)))
    fig.update_yaxes(title=dict(text="positions", font=dict(size=12)))
    fig.update_layout(title=dict(text=title), height=300, bargap=0, margin=dict(l=10, r=10, t=60, b=10))
    return fig


def token_effects(raised: Sequence[tuple[str, float]], lowered: Sequence[tuple[str, float]], title: str) -> go.Figure:
    """(piece, mean effect on log p) of the tokens a feature raises and lowers: bars, largest at the top."""
    rows = list(raised) + list(lowered)[::-1]
    values = np.array([v for _, v in rows], dtype=np.float64)
    fig = go.Figure(go.Bar(x=values, y=list(range(len(rows))), orientation="h",
                           marker=dict(color=values, colorscale=SIGNED_SCALE, cmid=0.0),
                           customdata=[label(p) for p, _ in rows],
                           hovertemplate="%{customdata}: %{x:+.3f} nats<extra></extra>"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), ticktext=[label(p) for p, _ in rows],
                     autorange="reversed")
    fig.update_xaxes(title=dict(text="log p with the feature − without it (nats)",
                                font=dict(size=12)))
    fig.update_layout(title=dict(text=title), height=max(260, 90 + 24 * len(rows)),
                      margin=dict(l=10, r=10, t=60, b=10))
    return fig


def head_reads(heads: np.ndarray, title: str) -> go.Figure:
    """heads [decoder layers, heads]: how much each cross-attention head's write changes when the feature is
    removed (the heads that read it most, brightest)."""
    heads = np.asarray(heads, dtype=np.float64)
    layers, n_heads = heads.shape
    fig = go.Figure(go.Heatmap(
        z=np.round(heads, 5), x=list(range(n_heads)), y=list(range(layers)), colorscale=SEQUENTIAL_SCALE, zmin=0.0,
        text=[[f"{v:.2g}" for v in row] for row in heads], texttemplate="%{text}", textfont=dict(size=11),
        colorbar=dict(title=dict(text="change", font=dict(size=12))),
        hovertemplate="decoder layer %{y}, head %{x}: %{z:.4f}<extra></extra>", xgap=2, ygap=2))
    fig.update_xaxes(tickmode="array", tickvals=list(range(n_heads)), ticktext=[f"H{h + 1}" for h in range(n_heads)])
    fig.update_yaxes(tickmode="array", tickvals=list(range(layers)), ticktext=[f"L{i + 1}" for i in range(layers)],
                     autorange="reversed", title=dict(text="decoder layer", font=dict(size=12)))
    fig.update_layout(title=dict(text=title), height=160 + 40 * layers, margin=dict(l=10, r=10, t=60, b=10))
    return fig


def over_training(labels: Sequence[str], values: np.ndarray, current: int | None, title: str) -> go.Figure:
    """values [checkpoints, contexts]: each checkpoint of the run across (in training order, `labels`), the
    mean activation over the contexts as a line and each context's as a dot; `current` circled."""
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim != 2 or vals.shape[0] != len(labels) or vals.shape[0] == 0:
        raise ValueError(f"values {vals.shape} for {len(labels)} checkpoints")
    x = [label(n) for n in labels]
    dots_x = [x[c] for c in range(vals.shape[0]) for _ in range(vals.shape[1])]
    fig = go.Figure(go.Scatter(x=dots_x, y=np.round(vals.ravel(), 4), mode="markers", name="each context",
                               marker=dict(size=7, color="rgba(120, 120, 120, 0.45)"),
                               hovertemplate="%{x}: %{y:.3f}<extra>a context</extra>"))
    mean = vals.mean(axis=1) if vals.shape[1] else np.zeros(len(labels))
    fig.add_trace(go.Scatter(x=x, y=np.round(mean, 4), mode="lines+markers", name="mean of its contexts",
                             line=dict(width=3, color=BAR_COLOUR), marker=dict(size=11),
                             hovertemplate="%{x}: mean %{y:.3f}<extra></extra>"))
    if current is not None and 0 <= current < len(x):
        fig.add_trace(go.Scatter(x=[x[current]], y=[float(mean[current])], mode="markers", hoverinfo="skip",
                                 showlegend=False, marker=dict(size=20, color="rgba(0,0,0,0)",
                                                               line=dict(width=3, color=LOW_COLOUR))))
    fig.update_xaxes(type="category", title=dict(text="checkpoint of the run", font=dict(size=12)))
    fig.update_yaxes(title=dict(text="activation", font=dict(size=12)), rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=320, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig
