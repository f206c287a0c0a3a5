"""Figures of the Architecture page: the paper's Figure 1 drawn from the live model, and one small
figure per block of its worked numbers (explorer.inspection.worked).

The diagram is plotly shapes and annotations (offline, nothing fetched), laid out like the paper's
Figure 1: the encoder on the left, the decoder on the right, N x around each stack's layer. Each
block carries a key from BLOCKS; a grid of nearly invisible markers over every block carries that key
in `customdata`, so a click selects a point whose customdata names the block (Streamlit's
on_select). Pure builders: numpy and plain values in, plotly Figure out, no Streamlit.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.plots.style import SIGNED_SCALE, label, signed_range

# The blocks a user can choose: key -> (name in the UI, which stack's tokens it works on).
BLOCKS = {
    "src_embed": ("Input embedding + positional encoding", "encoder"),
    "enc_attn": ("Encoder multi-head self-attention", "encoder"),
    "enc_norm": ("Encoder add & norm (residual, LayerNorm)", "encoder"),
    "enc_ffn": ("Encoder feed-forward", "encoder"),
    "tgt_embed": ("Output embedding (shifted right) + positional encoding", "decoder"),
    "dec_attn": ("Decoder masked multi-head self-attention", "decoder"),
    "cross_attn": ("Decoder multi-head cross-attention over the encoder output", "decoder"),
    "dec_norm": ("Decoder add & norm (residual, LayerNorm)", "decoder"),
    "dec_ffn": ("Decoder feed-forward", "decoder"),
    "generator": ("Linear + softmax: the next token", "decoder"),
}
# A pre-norm model's norm blocks (M2M100, NLLB): the LayerNorm at the start of each sublayer's branch.
PRE_NORM_NAMES = {"enc_norm": "Encoder LayerNorm (before each sublayer; + a final one)",
                  "dec_norm": "Decoder LayerNorm (before each sublayer; + a final one)"}


def flow_order(norm_first: bool = False) -> list[str]:
    """The blocks in the order the data passes them, source first: a pre-norm model's LayerNorm before the
    attention it feeds, the paper's Add & Norm after it."""
    order = list(BLOCKS)
    if norm_first:
        for norm, attention in (("enc_norm", "enc_attn"), ("dec_norm", "dec_attn")):
            order.remove(norm)
            order.insert(order.index(attention), norm)
    return order


def block_name(key: str, norm_first: bool = False) -> str:
    """A block's name in the UI, for this model's norm order."""
    return PRE_NORM_NAMES.get(key, BLOCKS[key][0]) if norm_first else BLOCKS[key][0]


# The attention kind (explorer.inspection.trace) each attention block shows.
ATTENTION_BLOCKS = {"enc_attn": "encoder", "dec_attn": "decoder", "cross_attn": "cross"}

FILL = {"embed": "#f6c9c4", "attn": "#fbdcae", "norm": "#f4f1b6", "ffn": "#c9e6f4", "linear": "#ddd5f0",
        "softmax": "#cfeccb"}
SELECTED = "#d62728"
WIDTH, HEIGHT = 2.8, 0.72           # a block's size in data units
ENC_X, DEC_X = 2.4, 7.4             # the two columns' centres


def _layout(n_enc: int, n_dec: int, activation: str, norm_first: bool) -> list[tuple[str, str, str, float, float]]:
    """(block key, text, fill, x, y) of every box, bottom to top as in Figure 1. A pre-norm model's
    LayerNorm is drawn below the sublayer it feeds (its branch starts with it; the residual adds after),
    the paper's post-norm "Add & Norm" above the sublayer whose output it takes."""
    norm = "LayerNorm" if norm_first else "Add & Norm"
    ffn = f"Feed Forward ({activation})"

    def stack(key_norm: str, x: float, sublayers: list[tuple[str, str, str]]) -> list:
        boxes, y = [], 3.8
        for key, text, fill in sublayers:
            pair = [(key_norm, norm, FILL["norm"]), (key, text, fill)]
            for first, (k, t, f) in zip((True, False), pair if norm_first else pair[::-1]):
                boxes.append((k, t, f, x, round(y, 2)))
                y += 1.0 if first else 1.1
        return boxes

    return [("src_embed", "Input Embedding", FILL["embed"], ENC_X, 1.2),
            *stack("enc_norm", ENC_X, [("enc_attn", "Multi-Head Attention", FILL["attn"]),
                                       ("enc_ffn", ffn, FILL["ffn"])]),
            ("tgt_embed", "Output Embedding", FILL["embed"], DEC_X, 1.2),
            *stack("dec_norm", DEC_X, [("dec_attn", "Masked Multi-Head Attention", FILL["attn"]),
                                       ("cross_attn", "Multi-Head Attention", FILL["attn"]),
                                       ("dec_ffn", ffn, FILL["ffn"])]),
            ("generator", "Linear", FILL["linear"], DEC_X, 10.9),
            ("generator", "Softmax", FILL["softmax"], DEC_X, 11.9)]


def _arrow(x0: float, y0: float, x1: float, y1: float) -> dict:
    return dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True,
                arrowhead=2, arrowsize=1, arrowwidth=1.4, arrowcolor="#444")


def architecture_figure(selected: str | None = None, n_enc: int = 6, n_dec: int = 6, activation: str = "relu",
                        norm_first: bool = False, hover: dict[str, str] | None = None) -> go.Figure:
    """Figure 1 of the paper for a model of n_enc + n_dec layers; the `selected` block (a BLOCKS key)
    is outlined in red. `hover` adds a line per block key (e.g. its parameter count) to the hover text.
    Every box is clickable: the figure's one trace holds markers with customdata = the block key."""
    hover = hover or {}
    boxes = _layout(n_enc, n_dec, activation, norm_first)
    shapes, notes = [], []
    for top, n, x in ((7.55, n_enc, ENC_X), (9.65, n_dec, DEC_X)):             # the N x frames
        shapes.append(dict(type="rect", x0=x - WIDTH / 2 - 0.3, x1=x + WIDTH / 2 + 0.3, y0=3.1, y1=top,
                           line=dict(color="#888", width=1.5), fillcolor="rgba(235,235,235,0.5)", layer="below"))
        side = -1 if x == ENC_X else 1
        notes.append(dict(x=x + side * (WIDTH / 2 + 0.75), y=(3.1 + top) / 2, text=f"<b>{n}×</b>", showarrow=False,
                          font=dict(size=16)))
    xs, ys, keys, texts = [], [], [], []
    for key, text, fill, x, y in boxes:
        chosen = key == selected
        shapes.append(dict(type="rect", x0=x - WIDTH / 2, x1=x + WIDTH / 2, y0=y - HEIGHT / 2, y1=y + HEIGHT / 2,
                           fillcolor=fill, line=dict(color=SELECTED if chosen else "#555", width=4 if chosen else 1)))
        notes.append(dict(x=x, y=y, text=f"<b>{text}</b>" if chosen else text, showarrow=False, font=dict(size=12)))
        info = block_name(key, norm_first) + (f"<br>{label(hover[key])}" if key in hover else "") + "<br>click to show its numbers"
        for dx in np.linspace(-WIDTH / 2 + 0.2, WIDTH / 2 - 0.2, 6):         # a row of click targets per box
            xs.append(x + dx)
            ys.append(y)
            keys.append(key)
            texts.append(info)
    for x, key in ((ENC_X, "src_embed"), (DEC_X, "tgt_embed")):                # the positional encodings
        chosen = key == selected
        shapes.append(dict(type="circle", x0=x - 0.22, x1=x + 0.22, y0=2.2 - 0.22, y1=2.2 + 0.22, fillcolor="white",
                           line=dict(color=SELECTED if chosen else "#555", width=3 if chosen else 1)))
        notes.append(dict(x=x, y=2.2, text="+", showarrow=False, font=dict(size=16)))
        side = -1 if x == ENC_X else 1
        notes.append(dict(x=x + side * 1.25, y=2.2, text="Positional<br>Encoding", showarrow=False, font=dict(size=11)))
        notes.append(_arrow(x + side * 0.6, 2.2, x + side * 0.24, 2.2))
        xs.append(x)
        ys.append(2.2)
        keys.append(key)
        texts.append(BLOCKS[key][0] + "<br>click to show its numbers")
    notes += [dict(x=ENC_X, y=0.3, text="Inputs", showarrow=False),
              dict(x=DEC_X, y=0.3, text="Outputs (shifted right)", showarrow=False),
              dict(x=DEC_X, y=12.9, text="Output Probabilities", showarrow=False)]
    for x, stops in ((ENC_X, (0.5, 0.84, 1.56, 1.98, 2.42, 3.44)), (DEC_X, (0.5, 0.84, 1.56, 1.98, 2.42, 3.44))):
        for a, b in zip(stops[::2], stops[1::2]):
            notes.append(_arrow(x, a, x, b))
    notes += [_arrow(DEC_X, 9.36, DEC_X, 10.54), _arrow(DEC_X, 11.26, DEC_X, 11.54), _arrow(DEC_X, 12.26, DEC_X, 12.7)]
    # the encoder's output feeds every decoder layer's cross-attention (keys and values)
    cross = next(y for key, _, _, _, y in boxes if key == "cross_attn")
    shapes.append(dict(type="path", path=f"M {ENC_X},7.27 L {ENC_X},8.2 L {(ENC_X + DEC_X) / 2},8.2 "
                                         f"L {(ENC_X + DEC_X) / 2},{cross}", line=dict(color="#444", width=1.4)))
    notes.append(_arrow((ENC_X + DEC_X) / 2, cross, DEC_X - WIDTH / 2, cross))
    if norm_first:                                   # pre-norm stacks end in one more LayerNorm each
        for x, y in ((ENC_X - 0.9, 7.85), (DEC_X + 0.9, 10.1)):               # beside the stack's way out
            notes.append(dict(x=x, y=y, text="+ final LayerNorm", showarrow=False, font=dict(size=11)))
    notes += [dict(x=ENC_X, y=13.4, text="<b>Encoder</b>", showarrow=False, font=dict(size=14)),
              dict(x=DEC_X, y=13.4, text="<b>Decoder</b>", showarrow=False, font=dict(size=14))]
    marker = go.Scatter(x=xs, y=ys, mode="markers", customdata=keys, text=texts, hovertemplate="%{text}<extra></extra>",
                        marker=dict(size=22, symbol="square", color="rgba(255,255,255,0.01)"), showlegend=False)
    fig = go.Figure(marker)
    for note in notes:
        note.setdefault("font", {}).setdefault("color", "#222")
    fig.update_layout(shapes=shapes, annotations=notes, height=640, margin=dict(l=5, r=5, t=10, b=5),
                      xaxis=dict(range=[0, 9.8], visible=False, fixedrange=True),
                      yaxis=dict(range=[0, 13.8], visible=False, fixedrange=True),
                      plot_bgcolor="white", dragmode=False, clickmode="event+select")
    return fig


def selected_block(event) -> str | None:
    """The block key of a plotly selection event (Streamlit's on_select state), or None."""
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return None
    for point in points or []:
        key = point.get("customdata") if isinstance(point, dict) else None
        if isinstance(key, list):
            key = key[0] if key else None
        if key in BLOCKS:
            return key
    return None


# ------------------------------------------------------------------------- per-block figures

def vectors_figure(rows: Sequence[np.ndarray], names: Sequence[str], title: str) -> go.Figure:
    """Vectors [d] one above the other as a heatmap in the signed scale (dimensions across)."""
    z = np.stack([np.asarray(r, dtype=np.float64) for r in rows])              # [n, d]
    limit = signed_range(z)
    fig = go.Figure(go.Heatmap(z=z, y=list(range(len(names))), colorscale=SIGNED_SCALE, zmin=-limit, zmax=limit,
                               hovertemplate="%{y}, dimension %{x}: %{z:.4f}<extra></extra>"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(names))), ticktext=[label(n) for n in names],
                     autorange="reversed")
    fig.update_layout(title=title, xaxis_title="dimension", height=110 + 45 * len(names),
                      margin=dict(l=10, r=10, t=40, b=40))
    return fig


def attention_figure(keys: Sequence[str], scores: np.ndarray, weights: np.ndarray, title: str) -> go.Figure:
    """Per key: the scaled score (top; masked keys left blank) and the softmax weight (bottom); keys
    numbered from 1 as in the app."""
    scores = np.asarray(scores, dtype=np.float64)
    x = list(range(len(keys)))
    shown = np.where(np.isfinite(scores), scores, np.nan)
    fig = go.Figure([
        go.Bar(x=x, y=shown, name="q·k / √d_k", marker_color="#e6873c", yaxis="y2",
               hovertemplate="%{x}: score %{y:.4f}<extra></extra>"),
        go.Bar(x=x, y=np.asarray(weights, dtype=np.float64), name="softmax weight", marker_color="#3c78b4",
               hovertemplate="%{x}: weight %{y:.4f}<extra></extra>"),
    ])
    ticks = dict(tickmode="array", tickvals=x, ticktext=[f"{i}:{label(k)}" for i, k in enumerate(keys, 1)])
    fig.update_layout(title=title, height=420, margin=dict(l=10, r=10, t=40, b=40), barmode="overlay",
                      xaxis=dict(anchor="y", **ticks), yaxis=dict(domain=[0, 0.45], title="weight", range=[0, 1]),
                      yaxis2=dict(domain=[0.55, 1], title="score", anchor="x"),
                      legend=dict(orientation="h", y=1.08))
    return fig


def bars_figure(names: Sequence[str], values: Sequence[float], title: str, y_title: str,
                highlight: int | None = None, horizontal: bool = False) -> go.Figure:
    """One bar per name (bar `highlight` in red): head contributions, zero counts, probabilities."""
    values = np.asarray(values, dtype=np.float64)
    colours = ["#3c78b4"] * len(values)
    if highlight is not None and 0 <= highlight < len(colours):
        colours[highlight] = SELECTED
    names = [label(n) for n in names]
    bar = (go.Bar(y=names, x=values, orientation="h", marker_color=colours) if horizontal
           else go.Bar(x=names, y=values, marker_color=colours))
    fig = go.Figure(bar)
    fig.update_layout(title=title, height=380, margin=dict(l=10, r=10, t=40, b=40))
    if horizontal:
        fig.update_layout(xaxis_title=y_title, yaxis=dict(autorange="reversed", type="category"))
    else:
        fig.update_layout(yaxis_title=y_title, xaxis=dict(type="category"))
    return fig


def histogram_figure(series: dict[str, np.ndarray], title: str, x_title: str) -> go.Figure:
    """Overlaid histograms of a few vectors (an FFN's hidden values; a LayerNorm's input and output)."""
    fig = go.Figure([go.Histogram(x=np.asarray(v, dtype=np.float64), name=name, opacity=0.6, nbinsx=60)
                     for name, v in series.items()])
    fig.update_layout(title=title, barmode="overlay", xaxis_title=x_title, yaxis_title="dimensions", height=360,
                      margin=dict(l=10, r=10, t=40, b=40), legend=dict(orientation="h", y=1.1))
    return fig


def norms_figure(labels: Sequence[str], token: np.ndarray, mean: np.ndarray, token_name: str) -> go.Figure:
    """The residual stream's norm after the embedding and each layer: one token, and the mean over tokens."""
    fig = go.Figure([go.Scatter(x=list(labels), y=np.asarray(token, dtype=np.float64), mode="lines+markers",
                                name=label(token_name)),
                     go.Scatter(x=list(labels), y=np.asarray(mean, dtype=np.float64), mode="lines+markers",
                                name="mean over positions", line=dict(dash="dot"))])
    fig.update_layout(title="‖residual stream‖ through the stack", yaxis_title="L2 norm", height=360,
                      margin=dict(l=10, r=10, t=40, b=40), xaxis=dict(type="category"))
    return fig
