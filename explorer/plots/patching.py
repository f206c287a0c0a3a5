"""The Causes page's figures: activation patching's grids of one minimal pair (explorer.studies.patching.grids).

Each cell is one patched run, normalised so that 0 = the patch does nothing and 1 = it does
everything (denoising: the share of the clean-vs-corrupted logit difference restored; noising: the
share destroyed). Values can leave [0, 1] (a patch can overshoot, or push the other way), so the colour
scale is the signed one (explorer.plots.style.SIGNED_SCALE: red above 0, blue below), symmetric around
0 and at least [-1, 1], so that one colour means one share on every grid of the page.

- position_grid: the residual stream, layers down and positions across (encoder depth x source
  position, decoder layer x target position);
- heads_grid: layer x head, one panel per attention kind, on one colour axis;
- changed_bars: the changed word's position(s) patched together, per encoder depth.
A picked cell (the one whose patched translation the page shows) is outlined. Pure builders: plain
data in, plotly Figures out, no Streamlit; labels are HTML-escaped once (style.label).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.plots.style import SIGNED_SCALE, click_targets, finite, label, signed_range

DIRECTION_WORDS = {"denoise": "share restored (denoising)", "noise": "share destroyed (noising)"}
PICKED = dict(color="black", width=3)


def colour_limit(*grids: np.ndarray) -> float:
    """The half-width of the page's colour range: at least 1 (a whole effect), more if a cell overshoots."""
    return max([1.0] + [signed_range(g) for g in grids if np.asarray(g).size])


def _check(direction: str) -> str:
    if direction not in DIRECTION_WORDS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTION_WORDS)}, not {direction!r}")
    return DIRECTION_WORDS[direction]


def _outline(fig: go.Figure, row: int, col: int, xref: str = "x", yref: str = "y") -> None:
    fig.add_shape(type="rect", x0=col - 0.5, x1=col + 0.5, y0=row - 0.5, y1=row + 0.5, xref=xref, yref=yref,
                  line=PICKED, fillcolor="rgba(0,0,0,0)")


def position_grid(values: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], title: str,
                  direction: str = "denoise", picked: tuple[int, int] | None = None,
                  limit: float | None = None, clickable: bool = False) -> go.Figure:
    """A residual-stream grid [rows, columns] (rows: depths or layers; columns: positions); `clickable`:
    with click targets (click_targets)."""
    words = _check(direction)
    z = finite(values)                                                        # [R, C]
    if z.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"a grid of {z.shape} needs {z.shape[0]} row and {z.shape[1]} column labels")
    limit = limit or colour_limit(z)
    rows, cols = [label(r) for r in row_labels], [label(c) for c in col_labels]
    custom = np.array([[f"{r}, {c}" for c in cols] for r in rows], dtype=object)
    fig = go.Figure(go.Heatmap(
        z=np.round(z, 4), x=list(range(z.shape[1])), y=list(range(z.shape[0])), customdata=custom,
        zmin=-limit, zmax=limit, colorscale=SIGNED_SCALE, xgap=1, ygap=1,
        colorbar=dict(title=dict(text="share", font=dict(size=12))),
        hovertemplate=f"%{{customdata}}<br>{words}: %{{z:.3f}}<extra></extra>", hoverinfo="skip" if clickable else None))
    if clickable:
        fig.data[0].hovertemplate = None
        shares = np.array([[f"{c}<br>{words}: {v:.3f}" for c, v in zip(row, vals)] for row, vals in zip(custom, z)],
                          dtype=object)
        fig.add_trace(click_targets(*z.shape, "%{customdata[0]}<extra></extra>", shares))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(cols))), ticktext=cols, tickangle=-45 if len(cols) > 8 else 0)
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed")
    if picked is not None:
        _outline(fig, *picked)
    fig.update_layout(title=dict(text=f"{title}<br>{words}"), height=200 + 45 * len(rows),
                      margin=dict(l=10, r=10, t=80, b=10))
    return fig


def heads_grid(grids: Mapping[str, np.ndarray], titles: Mapping[str, str], direction: str = "denoise",
               picked: tuple[str, int, int] | None = None, limit: float | None = None,
               clickable: bool = False) -> go.Figure:
    """One layer x head panel per attention kind (grids[kind]: [layers, heads], titles[kind]: its name),
    on one colour axis; `picked`: (kind, layer row, head column), 0-based; `clickable`: with click
    targets, panel i's the trace len(grids) + i."""
    words = _check(direction)
    kinds = list(grids)
    limit = limit or colour_limit(*grids.values())
    fig = make_subplots(rows=1, cols=max(1, len(kinds)), subplot_titles=[label(titles[k]) for k in kinds],
                        horizontal_spacing=0.06)
    for i, kind in enumerate(kinds):
        z = finite(grids[kind])                                               # [L, H]
        fig.add_trace(go.Heatmap(
            z=np.round(z, 4), x=list(range(z.shape[1])), y=list(range(z.shape[0])), coloraxis="coloraxis",
            xgap=1, ygap=1, hovertemplate=f"{label(titles[kind])}<br>layer %{{customdata[0]}}, head "
                                          f"%{{customdata[1]}}<br>{words}: %{{z:.3f}}<extra></extra>",
            customdata=np.dstack(np.meshgrid(np.arange(1, z.shape[1] + 1), np.arange(1, z.shape[0] + 1))[::-1])),
            row=1, col=i + 1)
        fig.update_xaxes(title_text="head", tickmode="array", tickvals=list(range(z.shape[1])),
                         ticktext=[str(h + 1) for h in range(z.shape[1])], row=1, col=i + 1)
        fig.update_yaxes(title_text="layer" if i == 0 else None, tickmode="array", tickvals=list(range(z.shape[0])),
                         ticktext=[str(layer + 1) for layer in range(z.shape[0])], autorange="reversed", row=1, col=i + 1)
        axis = "" if i == 0 else str(i + 1)
        if picked is not None and picked[0] == kind:
            _outline(fig, picked[1], picked[2], xref=f"x{axis}", yref=f"y{axis}")
    if clickable:
        for i, kind in enumerate(kinds):
            z = finite(grids[kind])                                           # [L, H]
            fig.data[i].hoverinfo, fig.data[i].hovertemplate = "skip", None
            shares = np.array([[f"{label(titles[kind])}<br>layer {r + 1}, head {h + 1}<br>{words}: {z[r, h]:.3f}"
                                for h in range(z.shape[1])] for r in range(z.shape[0])], dtype=object)
            axis = "" if i == 0 else str(i + 1)
            fig.add_trace(click_targets(*z.shape, "%{customdata[0]}<extra></extra>", shares,
                                        xaxis=f"x{axis}", yaxis=f"y{axis}"))
    n_layers = max((np.asarray(g).shape[0] for g in grids.values()), default=1)
    fig.update_layout(title=dict(text=f"Attention heads: each head's output patched alone<br>{words}"),
                      coloraxis=dict(colorscale=SIGNED_SCALE, cmin=-limit, cmax=limit,
                                     colorbar=dict(title=dict(text="share", font=dict(size=12)))),
                      height=240 + 50 * n_layers, margin=dict(l=10, r=10, t=110, b=10))
    return fig


def changed_bars(values: np.ndarray, row_labels: Sequence[str], word: str, direction: str = "denoise") -> go.Figure:
    """The changed position(s) patched together at each encoder depth: one bar per depth."""
    words = _check(direction)
    v = finite(np.asarray(values, dtype=np.float64).reshape(-1))              # [depths]
    if v.shape[0] != len(row_labels):
        raise ValueError(f"{v.shape[0]} values need as many labels, not {len(row_labels)}")
    fig = go.Figure(go.Bar(x=[label(r) for r in row_labels], y=np.round(v, 4), marker_color="#b2182b",
                           hovertemplate=f"%{{x}}<br>{words}: %{{y:.3f}}<extra></extra>"))
    fig.update_yaxes(title_text="share", range=[min(0.0, float(np.nanmin(v)) if v.size else 0.0) - 0.05,
                                                max(1.0, float(np.nanmax(v)) if v.size else 1.0) + 0.05])
    fig.update_layout(title=dict(text=f"The changed word {label(word)} patched alone, at each encoder depth"
                                      f"<br>{words}"),
                      height=300, margin=dict(l=10, r=10, t=80, b=10))
    return fig
