"""The Alignment page's figures: plain data in (words, links, score matrices, the scorecard JSON),
plotly Figures out, no Streamlit.

- links_figure: target words down, source words across; gold sure links as dark squares, possible
  ones as light squares, a method's links as dots, green where they hit gold (sure or possible) and
  red where they miss; the method's scores as the faint background;
- aer_grid: a layers x heads heatmap of AER for one method and variant (lower is better);
- why_figure: for one target word, each method's scores over the source words side by side, each
  scaled to its own largest magnitude (attention is a share, attributions are log-prob units).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import WEIGHTS_SCALE, label, token_axis

HIT, MISS = "#1a9850", "#d73027"
SURE, POSSIBLE = "rgba(20,20,20,0.9)", "rgba(120,120,120,0.75)"


def links_figure(src_words: Sequence[str], tgt_words: Sequence[str], sure: set, possible: set,
                 predicted: set, scores: np.ndarray | None = None, title: str = "") -> go.Figure:
    """Links are (source index, target index); `possible` includes `sure` (Och & Ney's P)."""
    xs, ys = list(range(len(src_words))), list(range(len(tgt_words)))
    fig = go.Figure()
    if scores is not None and scores.size:
        fig.add_trace(go.Heatmap(z=np.abs(scores), x=xs, y=ys, colorscale=WEIGHTS_SCALE, showscale=False,
                                 opacity=0.5, hovertemplate="%{z:.3f}<extra>score</extra>"))
    for links, colour, name in ((possible - sure, POSSIBLE, "gold: possible"), (sure, SURE, "gold: sure")):
        if links:
            fig.add_trace(go.Scatter(x=[i for i, _ in links], y=[j for _, j in links], mode="markers", name=name,
                                     marker=dict(symbol="square-open", size=18, color=colour, line=dict(width=3)),
                                     hoverinfo="skip"))
    hits = {link for link in predicted if link in possible}
    for links, colour, name in ((hits, HIT, "predicted: hit"), (predicted - hits, MISS, "predicted: miss")):
        if links:
            fig.add_trace(go.Scatter(x=[i for i, _ in links], y=[j for _, j in links], mode="markers", name=name,
                                     marker=dict(symbol="circle", size=9, color=colour),
                                     text=[f"{label(tgt_words[j])} → {label(src_words[i])}" for i, j in links],
                                     hovertemplate="%{text}<extra>" + name + "</extra>"))
    fig.update_xaxes(**token_axis(src_words), title_text="source words", side="top")     # escapes them
    fig.update_yaxes(**token_axis(tgt_words), title_text="target words", autorange="reversed")
    size = 22
    fig.update_layout(title=title, height=max(320, 140 + size * len(tgt_words)),
                      legend=dict(orientation="h", y=-0.05), margin=dict(t=130, b=60))
    return fig


def aer_grid(grid: Sequence[Sequence[float]], title: str) -> go.Figure:
    """AER (0-1) per layer (down) and head (across), in percent."""
    g = 100 * np.asarray(grid, dtype=float)                                   # [L, H]
    fig = go.Figure(go.Heatmap(z=g, x=list(range(1, g.shape[1] + 1)), y=list(range(1, g.shape[0] + 1)),
                               colorscale="Viridis_r", zmin=0, zmax=100, colorbar=dict(title="AER %"),
                               text=np.round(g, 1), texttemplate="%{text}",
                               hovertemplate="layer %{y}, head %{x}<br>AER %{z:.1f}%<extra></extra>"))
    fig.update_xaxes(title_text="head", dtick=1)
    fig.update_yaxes(title_text="layer", dtick=1, autorange="reversed")
    fig.update_layout(title=title, height=120 + 50 * g.shape[0], margin=dict(t=60, b=40))
    return fig


def why_figure(src_words: Sequence[str], rows: dict[str, np.ndarray], target: str) -> go.Figure:
    """rows: method label -> scores over the source words for one target word."""
    fig = go.Figure()
    for name, values in rows.items():
        v = np.asarray(values, dtype=float)
        top = float(np.abs(v).max()) if v.size else 0.0
        fig.add_trace(go.Bar(x=list(range(len(src_words))), y=v / top if top > 0 else v, name=name,
                             customdata=v, hovertemplate="%{customdata:.4f}<extra>" + name + "</extra>"))
    fig.update_xaxes(**token_axis(src_words))                               # escapes them
    fig.update_yaxes(title_text="score / its largest magnitude")
    fig.update_layout(barmode="group", title=f"Why “{label(target)}”: each method's scores over the source words",
                      height=380, legend=dict(orientation="h", y=-0.35), margin=dict(t=60, b=120))
    return fig
