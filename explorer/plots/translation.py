"""Figures of the Translate page: pure builders (no Streamlit)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import PROBABILITY_SCALE, label, token_axis


def token_probs_figure(pieces: Sequence[str], logprobs: Sequence[float],
                       title: str = "Per-token probability") -> go.Figure:
    """One bar per output piece: the probability the model gave it (exp of its log-probability).

    Low bars are where the model hesitated; hover shows the log-probability as well.
    """
    lp = np.asarray(logprobs, dtype=float)
    if len(pieces) != len(lp):
        raise ValueError(f"{len(pieces)} pieces but {len(lp)} log-probabilities")
    probs = np.exp(lp)
    fig = go.Figure(go.Bar(
        x=list(range(len(pieces))), y=probs, customdata=lp, hovertext=[label(p) for p in pieces],
        marker=dict(color=probs, colorscale=PROBABILITY_SCALE, cmin=0.0, cmax=1.0),
        hovertemplate="%{hovertext}<br>p = %{y:.3f}<br>log p = %{customdata:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=300, margin=dict(l=10, r=10, t=50, b=10),
                      yaxis=dict(title="probability", range=[0, 1.02]),
                      xaxis=dict(**token_axis(pieces)))
    return fig
