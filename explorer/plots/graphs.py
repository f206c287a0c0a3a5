"""The Graphs page's figure: one attribution graph (explorer.studies.graphs) laid out as an encoder-decoder
reads: the source's positions on the left, the decoder's prefix on the right, one row per layer from the
embeddings at the bottom through the encoder's FFNs and then the decoder's up to the explained logit at the
top. A feature of the encoder sits over its source word, a decoder feature over the prefix piece it reads;
an edge from the left half to the right half runs through cross-attention.

Nodes are sized and coloured by the share of the logit's influence reaching them; edges (the pruned graph's)
are red when they push their target up, blue when they pull it down (the app's signed scale), wider the
larger their weight; at most MAX_LINKS_DRAWN of them, the strongest.
Pure builder: rows in (explorer.studies.graphs.rows.node_rows), a plotly Figure out.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import label

GAP = 1.0                     # empty columns between the source's last position and the prefix's first
SPREAD = 0.8                  # the width a layer's nodes at one position share, in positions
EDGE_WIDTHS = (0.6, 1.6, 3.2)  # the edges' three widths, weakest third to strongest
MAX_LINKS_DRAWN = 500         # the strongest links drawn: a bible-es-en graph keeps thousands (a hairball); all
                              # of them are in the page's CSV and JSON
POSITIVE, NEGATIVE = "rgba(178,24,43,{a})", "rgba(33,102,172,{a})"     # RdBu_r's ends: up red, down blue
SYMBOLS = {"feature": "circle", "error": "square", "token": "diamond", "logit": "star"}
KIND_NAMES = {"feature": "feature", "error": "error (what the dictionary misses)", "token": "token embedding",
              "logit": "explained logit"}


def _x(row: dict, src_len: int) -> float:
    return float(row["ctx"]) if row["side"] == "source" else src_len + GAP + row["position"]


def _y(row: dict, n_encoder: int, n_layers: int) -> int:
    if row["kind"] == "token":
        return 0
    if row["kind"] == "logit":
        return n_layers + 1
    return 1 + row["layer"] + (0 if row["stack"] == "encoder" else n_encoder)


def places(rows: Sequence[dict], src_len: int, n_encoder: int, n_layers: int) -> dict[str, tuple[float, float]]:
    """{node id: (x, y)}: nodes sharing a layer and a position spread side by side, the most influential
    in the middle."""
    cells: dict[tuple[float, int], list[dict]] = {}
    for row in rows:
        cells.setdefault((_x(row, src_len), _y(row, n_encoder, n_layers)), []).append(row)
    placed = {}
    for (x, y), here in cells.items():
        here = sorted(here, key=lambda r: -r["influence"])
        order = sorted(range(len(here)), key=lambda i: (i % 2, i if i % 2 == 0 else -i))   # middle out
        step = SPREAD / max(1, len(here))
        for slot, i in enumerate(order):
            placed[here[i]["id"]] = (x + (slot - (len(here) - 1) / 2) * step, y)
    return placed


def hover(row: dict) -> str:
    """A node's hover text: stack, layer, position, piece, feature id, activation, influence."""
    where = f"{row['side']} position {row['position'] + 1} {label(row['piece'])}"
    if row["kind"] in ("feature", "error"):
        head = f"{row['stack']} layer {row['layer'] + 1}, {where}"
    else:
        head = where
    lines = [f"<b>{KIND_NAMES[row['kind']]}</b>", head]
    if row["kind"] == "feature":
        lines += [f"feature #{row['latent']}", f"activation {row['activation']:.3f}"]
    lines.append(f"influence {row['influence']:.3f}")
    return "<br>".join(lines)


def graph_figure(rows: Sequence[dict], links: Sequence[dict], pieces: Sequence[str], src_len: int, n_encoder: int,
                 n_layers: int, title: str, layer_names: Sequence[str] | None = None) -> go.Figure:
    """rows: node_rows(graph); links: the graph's links ({source, target, weight}); pieces: the source pieces
    then the prefix's; n_layers: the FFN sites of both stacks (the first n_encoder the encoder's)."""
    at = places(rows, src_len, n_encoder, n_layers)
    fig = go.Figure()
    _edges(fig, links, at)
    biggest = max([r["influence"] for r in rows if r["kind"] != "logit"] + [1e-12])        # sizes
    brightest = max([r["influence"] for r in rows if r["kind"] in ("feature", "error")] + [1e-12])   # colours
    for kind in ("token", "error", "feature", "logit"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        share = np.array([1.0 if kind == "logit" else r["influence"] / biggest for r in mine])   # [n]
        fig.add_trace(go.Scatter(
            x=[at[r["id"]][0] for r in mine], y=[at[r["id"]][1] for r in mine], mode="markers", name=KIND_NAMES[kind],
            marker=dict(symbol=SYMBOLS[kind], size=8 + 22 * np.sqrt(np.clip(share, 0, 1)),
                        color=[r["influence"] for r in mine] if kind in ("feature", "error") else
                        ("#444444" if kind == "token" else "#d62728"),
                        colorscale="Viridis", cmin=0, cmax=brightest, line=dict(width=1, color="white"),
                        showscale=kind == "feature",
                        colorbar=dict(title=dict(text="influence", font=dict(size=12)), x=1.02) if kind == "feature"
                        else None),
            customdata=[[r["id"]] for r in mine], text=[hover(r) for r in mine],
            hovertemplate="%{text}<extra></extra>"))
    ticks = list(range(src_len)) + [src_len + GAP + t for t in range(len(pieces) - src_len)]
    fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=[label(p) for p in pieces], tickangle=-45,
                     range=[-0.7, src_len + GAP + len(pieces) - src_len - 0.3], showgrid=False, zeroline=False)
    names = list(layer_names) if layer_names is not None else (
        ["embeddings"] + [f"encoder {i + 1}" for i in range(n_encoder)]
        + [f"decoder {j + 1}" for j in range(n_layers - n_encoder)] + ["logit"])
    fig.update_yaxes(tickmode="array", tickvals=list(range(n_layers + 2)), ticktext=names, zeroline=False,
                     range=[-0.6, n_layers + 1.6], automargin=True)
    fig.add_vline(x=src_len - 1 + (GAP + 1) / 2, line=dict(color="rgba(120,120,120,0.5)", dash="dot"))
    fig.add_annotation(x=(src_len - 1) / 2, y=n_layers + 1.45, text="source (encoder)", showarrow=False,
                       font=dict(size=12))
    fig.add_annotation(x=src_len + GAP + (len(pieces) - src_len - 1) / 2, y=n_layers + 1.45,
                       text="output so far (decoder)", showarrow=False, font=dict(size=12))
    fig.update_layout(title=dict(text=title), height=260 + 70 * (n_layers + 2), hovermode="closest",
                      margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.18),
                      plot_bgcolor="white")
    return fig


def _edges(fig: go.Figure, links: Sequence[dict], at: dict[str, tuple[float, float]]) -> None:
    """The links as line segments, one trace per sign and width third (a trace has one width)."""
    shown = sorted((l for l in links if l["source"] in at and l["target"] in at),
                   key=lambda l: -abs(l["weight"]))[:MAX_LINKS_DRAWN]
    if not shown:
        return
    sizes = np.abs(np.array([l["weight"] for l in shown], dtype=np.float64))       # [E]
    cuts = np.quantile(sizes, [1 / 3, 2 / 3]) if len(sizes) > 2 else np.array([math.inf, math.inf])
    third = np.searchsorted(cuts, sizes, side="right")                             # [E] in 0..2
    for sign, colour in ((1, POSITIVE), (-1, NEGATIVE)):
        for w, width in enumerate(EDGE_WIDTHS):
            xs, ys = [], []
            for link, t in zip(shown, third):
                if t != w or (link["weight"] >= 0) != (sign > 0):
                    continue
                (x0, y0), (x1, y1) = at[link["source"]], at[link["target"]]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
            if xs:
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                         line=dict(width=width, color=colour.format(a=0.2 + 0.2 * w))))
