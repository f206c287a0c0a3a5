"""The look every figure shares: colour scales, token labels, and the layers x heads grid.

One module, so that the same quantity looks the same on every page (attention weights in one blue
scale whether the Attention, Beam or Checkpoints page draws them; signed values in one red-blue
scale) and a change of look is made once. Pure builders: numpy in, plotly Figure out, no Streamlit.

Tokens go on numeric axes with tick labels (a sentence often repeats a token, and a categorical
axis would merge the repeats), and every token is HTML-escaped first: plotly renders a subset of
HTML in labels and hover text, so `<s>` would vanish and `<b>` would turn bold.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

WEIGHTS_SCALE = "Blues"          # attention weights and other shares of 1, from 0
SIGNED_SCALE = "RdBu_r"          # scores, differences, positional encodings: red above 0, blue below
SEQUENTIAL_SCALE = "Viridis"     # unbounded magnitudes: head statistics, dot products
PROBABILITY_SCALE = "RdYlGn"     # a token's probability: red unsure, green sure
MASK_COLOUR = "rgba(120,120,120,0.55)"


def label(token: str) -> str:
    """A token as safe plotly text (escaped; the sentencepiece marker kept, it shows word starts)."""
    return html.escape(str(token), quote=False)


def token_axis(tokens: Sequence[str]) -> dict:
    return dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=[label(t) for t in tokens])


def finite(matrix: np.ndarray) -> np.ndarray:
    """-inf (masked scores) -> NaN, which plotly leaves blank instead of failing to serialise."""
    m = np.asarray(matrix, dtype=np.float64)
    return np.where(np.isfinite(m), m, np.nan)


def signed_range(values: np.ndarray) -> float:
    """The half-width of a colour range symmetric around 0 that holds every finite value (1 if none)."""
    values = np.asarray(values, dtype=np.float64)
    found = np.abs(values[np.isfinite(values)])
    return float(found.max()) if found.size and found.max() > 0 else 1.0


def click_targets(rows: int, cols: int, hover: str, custom=None, **axes) -> go.Scatter:
    """An invisible marker on every cell of a rows x cols heatmap: plotly selects points of a scatter,
    never of a heatmap, so a click on a cell reaches the app (st.plotly_chart's on_select) as this
    trace's point (x: column, y: row). It carries the cell's hover, the heatmap's own is skipped."""
    y, x = np.divmod(np.arange(rows * cols), cols)                           # [R * C] row-major
    invisible = dict(marker=dict(opacity=0))
    return go.Scatter(x=x, y=y, mode="markers", marker=dict(symbol="square", size=18, opacity=0),
                      selected=invisible, unselected=invisible, showlegend=False, hovertemplate=hover,
                      customdata=None if custom is None else np.asarray(custom, dtype=object).reshape(rows * cols, -1),
                      **axes)


def head_grid(stack: np.ndarray, title: str, diverging: bool = False, q_tokens: Sequence[str] | None = None,
              k_tokens: Sequence[str] | None = None, clickable: bool = False) -> go.Figure:
    """Layers down, heads across: one small heatmap per head of a stack [L, H, q, k], for every page
    that shows all heads at once. Weights in WEIGHTS_SCALE from 0; `diverging` (scores, differences)
    in SIGNED_SCALE, symmetric around 0. With q_tokens and k_tokens, hovering names the tokens.

    Kept light, because it is redrawn on every change: the axes are laid out by hand (plotly's
    make_subplots + add_trace costs ~0.1 s of CPU for 12 heads; this ~10 ms), values are rounded
    to 3 decimals and sent as float32, no tick labels, one shared colour axis. `clickable`: after the
    L x H heatmaps, one trace of click targets per head (a 3 x 3 lattice over its panel, in the same
    order), so a click on a head reaches the app as curve L*H + layer*H + head.
    """
    stack = finite(stack)                                                     # [L, H, q, k]
    hover = "query %{y} → key %{x}"
    custom = None
    if q_tokens is not None and k_tokens is not None:
        custom = np.array([[f"{label(q)} → {label(k)}" for k in k_tokens] for q in q_tokens], dtype=object)
        hover = "%{customdata}"
    n_layers, n_heads = stack.shape[:2]
    gap_x, gap_y = 0.01, 0.12 / max(n_layers, 1)
    data, layout, titles = [], {}, []
    for layer in range(n_layers):
        top = 1 - layer / n_layers
        for head in range(n_heads):
            i = layer * n_heads + head + 1
            data.append(dict(type="heatmap", z=np.round(stack[layer, head], 3).astype(np.float32),
                             xaxis=f"x{i}", yaxis=f"y{i}", coloraxis="coloraxis", customdata=custom,
                             hovertemplate=f"layer {layer + 1}, head {head + 1}<br>{hover}: "
                                           "%{z:.3f}<extra></extra>"))
            x0, x1 = head / n_heads + gap_x, (head + 1) / n_heads - gap_x
            layout[f"xaxis{i}"] = dict(domain=[x0, x1], anchor=f"y{i}", showticklabels=False, ticks="",
                                       showgrid=False, zeroline=False)
            layout[f"yaxis{i}"] = dict(domain=[top - 1 / n_layers + gap_y / 2, top - gap_y], anchor=f"x{i}",
                                       showticklabels=False, ticks="", showgrid=False, zeroline=False,
                                       autorange="reversed")
            titles.append(dict(text=f"L{layer + 1} H{head + 1}", x=(x0 + x1) / 2, y=top - gap_y, xref="paper",
                               yref="paper", xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=10)))
    if clickable:
        rows, cols = stack.shape[2:]
        for i in range(n_layers * n_heads):
            target = click_targets(3, 3, f"layer {i // n_heads + 1}, head {i % n_heads + 1}: click to zoom"
                                         "<extra></extra>", xaxis=f"x{i + 1}", yaxis=f"y{i + 1}")
            data.append(dict(target.to_plotly_json(), x=target.x * (cols - 1) / 2, y=target.y * (rows - 1) / 2))
    if diverging:
        limit = signed_range(stack)
        coloraxis = dict(colorscale=SIGNED_SCALE, cmin=-limit, cmax=limit)
    else:
        coloraxis = dict(colorscale=WEIGHTS_SCALE, cmin=0.0)
    fig = go.Figure(data=data, layout=dict(layout, title=title, coloraxis=coloraxis, annotations=titles,
                                           height=70 + 140 * n_layers, margin=dict(l=10, r=10, t=60, b=10)))
    return fig


def scale_text(fig: go.Figure, factor: float, minimum: float = 0.0) -> go.Figure:
    """Every font size the figure states times `factor` and at least `minimum` px; its height and
    margins times `factor`, so the larger text keeps its room (in place; returned).

    Why one function: a figure is built once for a laptop screen, and presenter mode (a projector
    read from the back of a room) draws the same figure with larger text. Sizes a figure leaves unset
    come from the app's theme, which follows the page's type size, so only stated sizes need this:
    annotations (Figure 1's block names, the head grid's "L1 H2"), a trace's text (the beam tree's
    pieces), stated tick and title fonts. Data are untouched, so a figure reads the same numbers.
    """
    def grown(size):
        return max(round(float(size) * factor, 1), minimum)

    def walk(node) -> bool:
        """Scale the sizes under `node` (plain JSON); whether any was there."""
        found = False
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "template":                      # the theme's defaults: not the figure's own
                    continue
                if key.endswith("font") and isinstance(value, dict):
                    size = value.get("size")
                    if isinstance(size, (int, float)):
                        value["size"], found = grown(size), True
                    elif isinstance(size, (list, tuple)):  # one size per point
                        value["size"], found = [grown(s) for s in size], True
                found = walk(value) or found
        elif isinstance(node, (list, tuple)):
            for item in node:
                found = walk(item) or found
        return found

    # Only the parts that state a size are set back: re-validating a whole layout of many axes (the
    # head grid's 96) takes plotly seconds, the annotations alone milliseconds.
    for key, value in fig.layout.to_plotly_json().items():
        if key != "template" and walk({key: value}):
            fig.layout[key] = value
    if fig.layout.height is not None:
        fig.layout.height = round(fig.layout.height * factor)
    margin = {side: round(value * factor) for side, value in fig.layout.margin.to_plotly_json().items()
              if side in ("l", "r", "t", "b") and isinstance(value, (int, float))}
    if margin:
        fig.update_layout(margin=margin)
    for trace in fig.data:
        parts = {key: trace[key].to_plotly_json() for key in ("textfont", "marker", "colorbar", "hoverlabel")
                 if key in trace and trace[key] is not None}
        if walk(parts):
            trace.update(parts)
    return fig


# The parts of a figure whose text size the app's theme fills in when the figure leaves it unset, and which
# of three sizes each takes (Streamlit's plotly theme: text 0.75 rem, axis titles 0.875 rem, the title 1 rem).
THEMED_FONTS = {"font": "text", "legend.font": "text", "legend.title.font": "axis_title",
                "hoverlabel.font": "text", "title.font": "title",
                "coloraxis.colorbar.tickfont": "text", "coloraxis.colorbar.title.font": "axis_title"}
AXIS_FONTS = {"tickfont": "text", "title.font": "axis_title"}


def state_theme_sizes(fig: go.Figure, sizes: dict[str, float]) -> go.Figure:
    """Every text size the figure leaves to the theme, stated: `sizes` maps "text", "axis_title" and "title"
    to px (in place; returned). Sizes the figure states are kept.

    Why: Streamlit turns its theme's sizes (in rem) into px when a chart first draws, from the page's type
    size at that moment. Presenter mode enlarges the type size with a style sheet, and a chart drawn from a
    cache can reach the browser before that style sheet applies: its ticks then stay at the laptop's 12 px
    on the projector. A size the figure states does not depend on that order."""
    layout = fig.layout.to_plotly_json()

    def fill(node: dict, dotted: str, size: float) -> bool:
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return False
        font = node.setdefault(last, {})
        if not isinstance(font, dict) or isinstance(font.get("size"), (int, float, list, tuple)):
            return False
        font["size"] = sizes[size]
        return True

    changed = {}
    for dotted, size in THEMED_FONTS.items():
        top = dotted.split(".")[0]
        part = {top: changed.get(top, layout.get(top, {}))}
        if fill(part, dotted, size):
            changed[top] = part[top]
    axes = [key for key in layout if key.startswith(("xaxis", "yaxis"))] or ["xaxis", "yaxis"]
    for key in axes:
        part = {key: layout.get(key, {})}
        if any([fill(part[key], dotted, size) for dotted, size in AXIS_FONTS.items()]):
            changed[key] = part[key]
    if changed:
        fig.update_layout(changed)
    return fig
