"""The Layers page's figure: the decoder's logit lens as a grid (explorer.studies.lens.logit_lens).

Target positions down, decoder layers across (layer L is the model's own output): each cell names the
piece that layer would write there if it were the last, coloured by a probability, so a row read from
left to right shows a guess forming, and the column of the first layer whose guess is the final token
says where the decision was made. Positions go down rather than across because each cell carries a
piece as text, which needs the width. Pure builder: plain data in, plotly Figure out, no Streamlit;
every piece is HTML-escaped once (explorer.plots.style.label).

`show` picks the colour: "top", the probability of the cell's own top piece (how sure that layer is of
its guess), or "final", the probability that layer gives the token the model finally writes there (how
far it is from the answer). The hover lists the layer's top pieces and the final token's rank.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import PROBABILITY_SCALE, label

SHOWN = {"top": "probability of the layer's top piece", "final": "probability of the final token"}
ROW_PX, MIN_HEIGHT = 30, 260            # each position's row, and the least a figure takes


def lens_grid(top_pieces: Sequence, top_logprobs: np.ndarray, final_logprob: np.ndarray, final_rank: np.ndarray,
              final_pieces: Sequence[str], row_labels: Sequence[str], show: str = "top",
              title: str = "Logit lens: what each decoder layer would write") -> go.Figure:
    """The grid of one LogitLens: top_pieces [L][T][k] (text), top_logprobs [L, T, k], final_logprob and
    final_rank [L, T], final_pieces [T] (the token written at each position), row_labels [T]."""
    if show not in SHOWN:
        raise ValueError(f"show must be one of {', '.join(SHOWN)}, not {show!r}")
    top_lp = np.asarray(top_logprobs, dtype=np.float64)                       # [L, T, k]
    final_lp = np.asarray(final_logprob, dtype=np.float64)                    # [L, T]
    ranks = np.asarray(final_rank)                                            # [L, T]
    n_layers, n_pos = final_lp.shape
    if top_lp.shape[:2] != (n_layers, n_pos) or len(row_labels) != n_pos or len(final_pieces) != n_pos:
        raise ValueError(f"a lens of {n_layers} layers x {n_pos} positions needs as many pieces and labels")
    z = np.exp(top_lp[:, :, 0] if show == "top" else final_lp).T             # [T, L]
    text = [[label(top_pieces[layer][t][0]) for layer in range(n_layers)] for t in range(n_pos)]
    hover = [[_hover(top_pieces[layer][t], top_lp[layer, t], final_pieces[t], final_lp[layer, t], ranks[layer, t])
              for layer in range(n_layers)] for t in range(n_pos)]
    layers = [f"layer {i + 1}" + (" (output)" if i == n_layers - 1 else "") for i in range(n_layers)]
    fig = go.Figure(go.Heatmap(
        z=np.round(z, 4), x=list(range(n_layers)), y=list(range(n_pos)), text=text, texttemplate="%{text}",
        textfont=dict(size=12), customdata=np.array(hover, dtype=object), zmin=0.0, zmax=1.0,
        colorscale=PROBABILITY_SCALE, colorbar=dict(title=dict(text="p", font=dict(size=12))),
        hovertemplate="%{customdata}<extra></extra>", xgap=2, ygap=2))
    fig.update_xaxes(tickmode="array", tickvals=list(range(n_layers)), ticktext=layers, side="top",
                     title=dict(text="decoder layer", font=dict(size=12)))
    fig.update_yaxes(tickmode="array", tickvals=list(range(n_pos)), ticktext=[label(r) for r in row_labels],
                     autorange="reversed", title=dict(text="target position (what the model writes)",
                                                      font=dict(size=12)))
    # a subtitle at a stated size (a <sup> line is drawn at 70 % of the title, under presenter mode's 16 px)
    fig.update_layout(title=dict(text=title, subtitle=dict(text=f"colour: {SHOWN[show]}", font=dict(size=12))),
                      height=max(MIN_HEIGHT, 130 + ROW_PX * n_pos), margin=dict(l=10, r=10, t=110, b=10))
    return fig


def _hover(pieces: Sequence[str], logprobs: np.ndarray, final: str, final_lp: float, rank: int) -> str:
    listed = "<br>".join(f"{i + 1}. {label(p)}  {np.exp(lp):.3f}" for i, (p, lp) in enumerate(zip(pieces, logprobs)))
    return f"{listed}<br>final token {label(final)}: p {np.exp(final_lp):.3f}, rank {int(rank)}"

