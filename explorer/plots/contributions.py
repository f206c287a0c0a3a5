"""The Contributions page's figures (explorer.studies.contributions: ALTI+, Ferrando et al., EMNLP 2022).

- share_bars: each output token's source share as a bar, one row per token (a word per row reads at a
  projector's distance, where a colour alone would not), the calibrated threshold as a dashed line and
  the tokens under it in their own colour, so "this word owes little to the source" is seen as well as
  read;
- contribution_heatmap: a token x token matrix (rows: output tokens; columns: source tokens, and for a
  rollout the target prefix after them, split by a line), the rollout, one layer's cross block or raw
  cross-attention, each in the one colour scale of shares of 1 (explorer.plots.style.WEIGHTS_SCALE);
- share_curve: the mean source share at each checkpoint of one training run.

Pure builders: plain data in, plotly Figure out, no Streamlit; every token is HTML-escaped once
(explorer.plots.style.label).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import WEIGHTS_SCALE, label

BAR_COLOUR, LOW_COLOUR = "#3a7dc9", "#d9822b"      # a token's share; one under the threshold
ROW_PX, MIN_HEIGHT = 28, 240                       # each token's row, and the least a figure takes
CELL_PX, MAX_HEATMAP_HEIGHT = 26, 1400


def share_bars(tokens: Sequence[str], shares: Sequence[float], threshold: float | None = None,
               title: str = "Source share of each output token") -> go.Figure:
    """One horizontal bar per output token (`tokens`: row labels, already numbered), its length the
    token's source share in [0, 1]; tokens below `threshold` (None: no threshold) coloured apart."""
    share = np.asarray(shares, dtype=np.float64)                                  # [T]
    if share.ndim != 1 or len(tokens) != share.size:
        raise ValueError(f"{share.size} shares need as many tokens, not {len(tokens)}")
    if share.size == 0:
        raise ValueError("no output tokens to draw")
    low = share < threshold if threshold is not None else np.zeros(share.size, dtype=bool)
    rows = list(range(share.size))
    fig = go.Figure(go.Bar(
        x=np.round(share, 4), y=rows, orientation="h", text=[f"{s:.0%}" for s in share], textposition="outside",
        marker=dict(color=[LOW_COLOUR if f else BAR_COLOUR for f in low]),
        customdata=["under the threshold" if f else "" for f in low],
        hovertemplate="%{x:.1%} of it from the source %{customdata}<extra></extra>"))
    if threshold is not None:
        fig.add_vline(x=float(threshold), line=dict(color="black", dash="dash", width=2))
        fig.add_annotation(x=float(threshold), y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                           text=f"threshold {threshold:.0%}", font=dict(size=12))   # the axis is in %
    fig.update_xaxes(range=[0, 1.12], tickformat=".0%", title=dict(text="share from the source (the rest: the "
                                                                         "target prefix)", font=dict(size=12)))
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=[label(t) for t in tokens], autorange="reversed")
    fig.update_layout(title=dict(text=title), showlegend=False, bargap=0.25,
                      height=max(MIN_HEIGHT, 120 + ROW_PX * share.size), margin=dict(l=10, r=10, t=70, b=10))
    return fig


def contribution_heatmap(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], title: str,
                         n_src: int | None = None, quantity: str = "contribution") -> go.Figure:
    """matrix [T, K] with rows `row_labels` (output tokens) and columns `col_labels`; when the columns are
    [source tokens; target prefix], n_src marks where the source ends (a line, and the two halves named)."""
    m = np.asarray(matrix, dtype=np.float64)                                      # [T, K]
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"a {m.shape} matrix needs {len(row_labels)} row and {len(col_labels)} column labels")
    if n_src is not None and not 0 < n_src <= m.shape[1]:
        raise ValueError(f"n_src must be in [1, {m.shape[1]}], not {n_src}")
    top = float(np.nanmax(m)) if m.size and np.isfinite(np.nanmax(m)) and np.nanmax(m) > 0 else 1.0
    rows, cols = [label(t) for t in row_labels], [label(t) for t in col_labels]
    hover = [[f"{rows[i]} ← {cols[j]}: {m[i, j]:.3f}" for j in range(m.shape[1])] for i in range(m.shape[0])]
    fig = go.Figure(go.Heatmap(
        z=np.round(m, 4), x=list(range(m.shape[1])), y=list(range(m.shape[0])), zmin=0.0, zmax=top,
        colorscale=WEIGHTS_SCALE, customdata=np.array(hover, dtype=object), hovertemplate="%{customdata}<extra></extra>",
        colorbar=dict(title=dict(text=quantity, font=dict(size=12)))))
    if n_src is not None and n_src < m.shape[1]:
        fig.add_vline(x=n_src - 0.5, line=dict(color="black", width=3))
        for x, text in (((n_src - 1) / 2, "source"), ((n_src + m.shape[1] - 1) / 2, "target prefix")):
            fig.add_annotation(x=x, y=1.0, yref="paper", yanchor="bottom", showarrow=False, text=text,
                               font=dict(size=12))
    fig.update_xaxes(tickmode="array", tickvals=list(range(m.shape[1])), ticktext=cols, tickangle=-60)
    fig.update_yaxes(tickmode="array", tickvals=list(range(m.shape[0])), ticktext=rows, autorange="reversed",
                     title=dict(text="output token", font=dict(size=12)))
    fig.update_layout(title=dict(text=title), margin=dict(l=10, r=10, t=80, b=10),
                      height=min(MAX_HEATMAP_HEIGHT, max(MIN_HEIGHT + 60, 220 + CELL_PX * m.shape[0])))
    return fig


def share_curve(labels: Sequence[str], steps: Sequence[int | None], means: Sequence[float], current: int | None = None,
                title: str = "Mean source share over training") -> go.Figure:
    """The mean source share (`means`) at each checkpoint of a run (`labels`, at training `steps`: None
    where a checkpoint records none, then drawn in order); `current` (an index) is marked."""
    y = np.asarray(means, dtype=np.float64)                                       # [K]
    if not len(labels) == len(steps) == y.size or y.size == 0:
        raise ValueError(f"{len(labels)} labels, {len(steps)} steps and {y.size} means must agree (and not be empty)")
    by_step = all(isinstance(s, int) for s in steps)
    x = list(steps) if by_step else list(range(1, y.size + 1))
    names = [label(n) for n in labels]
    fig = go.Figure(go.Scatter(x=x, y=np.round(y, 4), mode="lines+markers+text", text=names, textposition="top center",
                               marker=dict(size=12, color=BAR_COLOUR), line=dict(width=3, color=BAR_COLOUR),
                               hovertemplate="%{text}: %{y:.3f}<extra></extra>", textfont=dict(size=12)))
    if current is not None and 0 <= current < y.size:
        fig.add_trace(go.Scatter(x=[x[current]], y=[float(y[current])], mode="markers", hoverinfo="skip",
                                 marker=dict(size=20, color="rgba(0,0,0,0)", line=dict(width=3, color=LOW_COLOUR))))
    fig.update_xaxes(title=dict(text="training step" if by_step else "checkpoint", font=dict(size=12)))
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", title=dict(text="mean source share", font=dict(size=12)))
    fig.update_layout(title=dict(text=title), showlegend=False, height=320, margin=dict(l=10, r=10, t=70, b=10))
    return fig
