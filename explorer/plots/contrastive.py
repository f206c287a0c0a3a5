"""Figures of the contrastive views (explorer.studies.contrastive): one step's attribution, the contrast beside
the plain one, and the beam-size curve over a test set. Pure builders: plain data in, plotly out.

The attribution axis is [source pieces | decoder inputs] (the decoder reads the start id and the prefix
written so far), numbered from 1 within each part as every page numbers positions, with a line between
the two parts: a token's bar is the signed sum over its vector's components.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.plots.style import label

CONTRAST_COLOUR, PLAIN_COLOUR = "#d62728", "#7f7f7f"
PENALTY_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
# with the colour, each length penalty's own marker and dash: two penalties that give the same numbers (beam 1
# is greedy whatever the penalty) draw one line over the other, and the markers still show both
PENALTY_MARKERS = ("circle", "diamond-open", "square-open", "x")
PENALTY_DASHES = ("solid", "dash", "dot", "dashdot")


def step_axis(src_pieces: Sequence[str], tgt_inputs: Sequence[str]) -> list[str]:
    """The attribution figure's tick labels: "src 3: ▁word" and "out 2: ▁word" (1-based in each part)."""
    return ([f"src {i}: {p}" for i, p in enumerate(src_pieces, 1)]
            + [f"out {i}: {p}" for i, p in enumerate(tgt_inputs, 1)])


def attribution_figure(src_pieces: Sequence[str], tgt_inputs: Sequence[str], contrast: np.ndarray,
                       plain: np.ndarray | None, title: str, contrast_name: str, plain_name: str) -> go.Figure:
    """Bars per input token: the contrast's attribution and, beside it, the plain attribution.

    `contrast`, `plain`: [S + P + 1] (source pieces, then the decoder's inputs)."""
    ticks = step_axis(src_pieces, tgt_inputs)
    x = np.arange(len(ticks))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=np.asarray(contrast, dtype=float), name=label(contrast_name),
                         marker_color=CONTRAST_COLOUR, hovertext=[label(t) for t in ticks],
                         hovertemplate="%{hovertext}: %{y:.3f}<extra>contrast</extra>"))
    if plain is not None:
        fig.add_trace(go.Bar(x=x, y=np.asarray(plain, dtype=float), name=label(plain_name),
                             marker_color=PLAIN_COLOUR, hovertext=[label(t) for t in ticks],
                             hovertemplate="%{hovertext}: %{y:.3f}<extra>plain</extra>"))
    fig.add_vline(x=len(src_pieces) - 0.5, line=dict(color="#555", dash="dot", width=1))
    fig.update_layout(title=title, barmode="group", height=420, margin=dict(l=40, r=20, t=90, b=110),
                      xaxis=dict(tickmode="array", tickvals=list(x), ticktext=[label(t) for t in ticks],
                                 tickangle=-60),
                      yaxis=dict(title="attribution (sum over the vector)", zeroline=True),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"))
    return fig


CURVE_PANELS = (("bleu", "BLEU"), ("chrf", "chrF"), ("length_ratio", "length ratio (output / reference words)"),
                ("mean_score", "mean model score (log-prob)"))


def curve_figure(rows: Sequence[dict]) -> go.Figure:
    """The beam-size curve: BLEU, chrF, length ratio and mean score against the beam size (log axis),
    one line per length penalty (rows as explorer.studies.contrastive.job writes `beam_curve`)."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[name for _, name in CURVE_PANELS],
                        horizontal_spacing=0.1, vertical_spacing=0.18)
    penalties = list(dict.fromkeys(r["length_penalty"] for r in rows))
    for p, penalty in enumerate(penalties):
        mine = sorted((r for r in rows if r["length_penalty"] == penalty), key=lambda r: r["beam"])
        beams = [r["beam"] for r in mine]
        for i, (key, _) in enumerate(CURVE_PANELS):
            colour = PENALTY_COLOURS[p % len(PENALTY_COLOURS)]
            fig.add_trace(go.Scatter(x=beams, y=[r[key] for r in mine], mode="lines+markers",
                                     name=f"length penalty {label(penalty)}", legendgroup=penalty,
                                     showlegend=i == 0,
                                     line=dict(color=colour, dash=PENALTY_DASHES[p % len(PENALTY_DASHES)]),
                                     marker=dict(symbol=PENALTY_MARKERS[p % len(PENALTY_MARKERS)], size=9 + 3 * p,
                                                 color=colour, line=dict(width=2, color=colour)),
                                     hovertemplate="beam %{x}: %{y:.3f}<extra>" + label(penalty) + "</extra>"),
                          row=i // 2 + 1, col=i % 2 + 1)
    fig.update_xaxes(type="log", title_text="beam size", tickvals=sorted({r["beam"] for r in rows}))
    # the title, then the legend under it, both placed from the figure's top edge: above the subplots'
    # own titles, in any type size (presenter mode scales the margins with the text)
    fig.update_layout(title=dict(text="The beam-size curve", x=0, xanchor="left", y=0.99, yanchor="top",
                                 yref="container"),
                      height=660, margin=dict(l=40, r=20, t=120, b=40),
                      legend=dict(orientation="h", x=0, xanchor="left", y=0.93, yanchor="top", yref="container"))
    return fig


ERROR_SERIES = (("search_errors", "over proven sentences", "#d62728", "circle", "solid", -0.08),
                ("search_errors_known", "known, over all searched", "#ff9896", "diamond-open", "dot", 0.08))


def search_error_figure(rows: Sequence[dict]) -> go.Figure | None:
    """Search errors per beam size (no length penalty): over the sentences exact search proved, and the
    known errors over all it searched (a lower bound). None when the run had no exact search.

    Two marked lines, not bars: a rate of 0 is a marker on the zero line (a bar of height 0 draws nothing,
    and a figure of zeros was empty axes), and the two series, often equal, sit a little apart around their
    beam size with different markers, so neither hides the other."""
    mine = sorted((r for r in rows if r.get("search_errors_known") is not None), key=lambda r: r["beam"])
    if not mine:
        return None
    fig = go.Figure()
    for key, name, colour, symbol, dash, offset in ERROR_SERIES:
        fig.add_trace(go.Scatter(
            x=[i + offset for i in range(len(mine))], y=[r.get(key) for r in mine], name=name,
            mode="lines+markers", customdata=[r["beam"] for r in mine], line=dict(color=colour, dash=dash),
            marker=dict(symbol=symbol, size=11, color=colour, line=dict(width=2, color=colour)),
            hovertemplate="beam %{customdata}: %{y:.3f}<extra>" + name + "</extra>"))
    fig.update_layout(title="Search errors: the beam missed an output the model scores higher",
                      height=380, xaxis=dict(title="beam size", tickmode="array", tickvals=list(range(len(mine))),
                                             ticktext=[str(r["beam"]) for r in mine], range=[-0.5, len(mine) - 0.5]),
                      yaxis=dict(title="share of sentences", range=[-0.05, 1.05], zeroline=True,
                                 zerolinecolor="#888"),
                      margin=dict(l=40, r=20, t=90, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left"))
    return fig


def no_search_errors(rows: Sequence[dict]) -> bool:
    """Whether exact search ran and found no search error at any beam size (every rate 0)."""
    rates = [r.get(key) for r in rows if r.get("search_errors_known") is not None for key, *_ in ERROR_SERIES]
    return bool(rates) and all(v is None or v == 0 for v in rates)
