"""Figures of the Training vs inference page: the causal mask, and a decoder run laid out by position.

Pure builders (no Streamlit). The row figure puts what the decoder read at position i directly
under what it was scored on at position i, so the shift is visible: each output moves one place
to the right to become the next input. Positions count from 1, as everywhere the app shows them.

Its rows are one heatmap each (each its own colours) at y = 0, 1, 2 on a numeric axis whose ticks
carry the row names. Not a categorical axis: plotly.js 4 (Streamlit's) fails on several one-row
heatmaps sharing one categorical axis ("Cannot read properties of undefined (reading 'length')")
and draws an empty box, which Python's plotly never notices.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import MASK_COLOUR, PROBABILITY_SCALE, label, token_axis

READS = "decoder reads"
SCORED = "scored token"
OWN_PICK = "model's own pick"
ROWS = (READS, SCORED, OWN_PICK)       # bottom to top: row r is drawn at y = r


def causal_mask_figure(inputs: Sequence[str], title: str = "Causal mask",
                       row_labels: Sequence[str] | None = None) -> go.Figure:
    """The decoder's self-attention mask over its inputs: row i (a query) may look at columns
    j <= i (white) and never at later ones (grey, set to -inf before the softmax). `row_labels`: how
    the rows are named (the app names a decoder row by the token it writes), else by their inputs."""
    n = len(inputs)
    blocked = np.triu(np.ones((n, n)), k=1)                                  # [T, T], 1 above the diagonal
    seen = np.where(blocked > 0, "masked (−∞)", "visible")
    fig = go.Figure(go.Heatmap(                                             # hover: positions from 1
        z=blocked, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        colorscale=[[0.0, "white"], [1.0, MASK_COLOUR]],
        hovertemplate="%{customdata}<extra></extra>",
        customdata=[[f"query {i + 1} → key {j + 1}: {seen[i, j]}" for j in range(n)] for i in range(n)]))
    side = min(420, 140 + 18 * n)
    fig.update_layout(title=title, height=side, margin=dict(l=10, r=10, t=50, b=10),
                      # the keys below the grid, as on every attention heatmap: on top they met the title
                      xaxis=dict(title="key (position read)", side="bottom", **token_axis(inputs)),
                      yaxis=dict(title="query", autorange="reversed", **token_axis(row_labels or inputs)))
    return fig


def rows_figure(inputs: Sequence[str], outputs: Sequence[str], logprobs: Sequence[float],
                top: Sequence[str] | None = None, agree: Sequence[bool] | None = None,
                title: str = "") -> go.Figure:
    """One column per position: the decoder's input on the bottom row, the token it was scored on
    above it (coloured by its probability) and, for teacher forcing, the model's own pick on top
    (green where it agrees with the forced token, red where it does not)."""
    n = len(outputs)
    if len(inputs) != n or len(logprobs) != n or (top is not None and len(top) != n):
        raise ValueError("inputs, outputs, log-probabilities (and picks) must have one entry per position")
    x = list(range(1, n + 1))                                                 # positions from 1
    probs = np.exp(np.asarray(logprobs, dtype=float))                          # [T]

    def row(name: str, z, pieces: Sequence[str], **style) -> go.Heatmap:
        return go.Heatmap(x=x, y=[ROWS.index(name)], z=[list(z)], name=name, zmin=0, zmax=1, xgap=2, ygap=2,
                          text=[[label(p) for p in pieces]], texttemplate="%{text}", **style)

    traces = [row(READS, [0.0] * n, inputs, showscale=False, colorscale=[[0, "#eeeeee"], [1, "#eeeeee"]],
                  hovertemplate="position %{x} reads %{text}<extra></extra>"),
              row(SCORED, probs, outputs, colorscale=PROBABILITY_SCALE, customdata=[list(logprobs)],
                  colorbar=dict(title="p", len=0.8, thickness=12),
                  hovertemplate="position %{x}: %{text}<br>p = %{z:.3f}<br>log p = %{customdata:.4f}<extra></extra>")]
    if top is not None:
        ok = [1.0 if a else 0.0 for a in (agree or [True] * n)]
        traces.append(row(OWN_PICK, ok, top, showscale=False, colorscale=[[0, "#f4a6a6"], [1, "#b7e4b0"]],
                          hovertemplate="position %{x}: the model would write %{text}<extra></extra>"))
    shown = ROWS[:len(traces)]
    fig = go.Figure(traces)
    fig.update_layout(title=title, height=110 + 45 * len(traces), margin=dict(l=10, r=10, t=50, b=10),
                      xaxis=dict(title="position", tickmode="array", tickvals=x),
                      yaxis=dict(tickmode="array", tickvals=list(range(len(shown))), ticktext=list(shown),
                                 range=[-0.5, len(shown) - 0.5], showgrid=False, zeroline=False))
    return fig
