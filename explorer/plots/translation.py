"""Figures of the Translate page: pure builders (no Streamlit)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.plots.style import PROBABILITY_SCALE, label, token_axis


def token_probs_figure(pieces: Sequence[str], logprobs: Sequence[float],
                       title: str = "Per-token probability") -> go.Figure:
    """One bar per output piece: the probability the model gave it (exp of its log-probability).

    Low bars are where the model hesitated; hover shows the log-probability as well. Each bar's colour
    is its probability on PROBABILITY_SCALE, written out as a colour: plotly.js maps numbers through a
    colour scale in the browser, but logs "Invalid color specifier" for each bar while doing so.
    """
    lp = np.asarray(logprobs, dtype=float)
    if len(pieces) != len(lp):
        raise ValueError(f"{len(pieces)} pieces but {len(lp)} log-probabilities")
    probs = np.exp(lp)
    fig = go.Figure(go.Bar(
        x=list(range(len(pieces))), y=probs, customdata=lp, hovertext=[label(p) for p in pieces],
        marker=dict(color=sample_colorscale(PROBABILITY_SCALE, np.clip(probs, 0.0, 1.0).tolist())),
        hovertemplate="%{hovertext}<br>p = %{y:.3f}<br>log p = %{customdata:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=300, margin=dict(l=10, r=10, t=50, b=10),
                      yaxis=dict(title="probability", range=[0, 1.02]),
                      xaxis=dict(**token_axis(pieces)))
    return fig
