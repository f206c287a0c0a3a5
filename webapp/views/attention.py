"""The sections of the Attention page, one function per tab (the page itself only wires them).

Each takes the plain data the page already has (a Trace, the Translation, the chosen view) and
draws with figures from explorer.plots.attention and explorer.plots.style; library calls go
through the caches in state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from explorer.inspection.attention_stats import (STAT_LABELS, STATS, boundary_key, stack_stats, stats_rows,
                                                word_alignment)
from explorer.inspection.trace import KIND_LABELS, KINDS, attention_kind
from explorer.plots import attention as plots
from explorer.plots.style import head_grid
from explorer.text.encoding import output_ids
from explorer.text.special import EOS_ID
from webapp import bertviz_offline, downloads, models, presenter, state, url_keys

QUANTITIES = {"weights": "Weights (after softmax)", "scores": "Scores QKᵀ/√dₖ (before softmax)",
              "unscaled": "Unscaled scores QKᵀ", "unscaled_softmax": "Softmax without the 1/√dₖ"}


@dataclass(frozen=True)
class View:
    kind: str
    layer: int          # 0-based
    head: int           # 0-based
    quantity: str
    show_mask: bool
    d_k: int


def axes(trace, kind: str) -> tuple[list[str], list[str], list[str] | None]:
    """(query tokens, key tokens, output token each query produced or None) for a kind."""
    queries, keys = trace.axes(kind)
    return queries, keys, trace.meta.get("out_tokens") if attention_kind(kind).queries == "tgt" else None


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row softmax that treats -inf (masked) as weight 0."""
    s = np.asarray(scores, dtype=np.float64)
    top = np.max(np.where(np.isfinite(s), s, -np.inf), axis=-1, keepdims=True)
    e = np.where(np.isfinite(s), np.exp(s - top), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


def quantity_stack(trace, kind: str, quantity: str, d_k: int) -> np.ndarray:
    """[L, H, q, k] of the chosen quantity for every layer of a kind."""
    if quantity == "weights":
        return trace.stack(kind)                                             # [L, H, q, k]
    scores = trace.stack(kind, "scores").astype(np.float64)                  # [L, H, q, k]
    if quantity == "scores":
        return scores
    unscaled = scores * math.sqrt(d_k)                                       # -inf stays -inf
    return unscaled if quantity == "unscaled" else softmax_rows(unscaled)


def causal_mask(q: int, k: int) -> np.ndarray:
    return np.triu(np.ones((q, k), dtype=bool), k=1)                         # True above the diagonal


def eos_key(trace, kind: str) -> int | None:
    """The boundary key for the 'to end-of-sentence' statistic (attention_stats.boundary_key), with
    the model's eos id from the trace (Marian's is 0; traces made before it was recorded: ours)."""
    return boundary_key(attention_kind(kind).keys, trace.meta.get("src_ids"), trace.meta.get("eos_id", EOS_ID))


def all_stats(trace) -> dict[str, dict[str, np.ndarray]]:
    return {kind: stack_stats(trace.stack(kind), eos_key(trace, kind)) for kind in KINDS}


# ---- the controls --------------------------------------------------------------------------------

SHOW_SHARE = 0.42              # the Show box's share of the row in presenter mode: its longest option whole


def control_columns(n_layers: int, n_heads: int, causal: bool) -> tuple:
    """Where the Layer and Head radios, the Show box and the Causal mask toggle go (None: not drawn).
    On a laptop one row ("Causal mask" whole). On a projector, in large type, the Show box keeps the room
    its longest option needs (SHOW_SHARE of the row: at 1024 px none is cut), Layer and Head share the rest
    by their numbers of options, and the toggle, which only decoder self-attention uses, comes under the
    row; for the other kinds it is left out (on a slide it would be a greyed-out control)."""
    if not presenter.on():
        return tuple(st.columns([2, 3, 3, 2]))
    rest, options = 1 - SHOW_SHARE, n_layers + n_heads + 2
    col1, col2, col3 = st.columns([rest * (n_layers + 1) / options, rest * (n_heads + 1) / options, SHOW_SHARE])
    return col1, col2, col3, st.container() if causal else None


# ---- tab: heads ----------------------------------------------------------------------------------

def zoom_clicked_head(n_layers: int, n_heads: int) -> None:
    """A click on the all-heads grid picks that head: the grid draws its L x H heatmaps, then one trace
    of click targets per head in the same order (plots.style.head_grid's `clickable`), so the clicked
    curve L*H + i is layer i // H, head i % H. Runs as the click's callback, before the widgets are drawn
    again, so the Layer and Head radios show it."""
    point = downloads.clicked_point("attn_grid")
    clicked = int(point.get("curve_number", -1)) - n_layers * n_heads if point else -1     # the click targets
    if 0 <= clicked < n_layers * n_heads:
        layer, head = divmod(clicked, n_heads)
        st.session_state["attn_layer"], st.session_state["attn_head"] = layer + 1, head + 1


# The grid and the zoomed head side by side, or one above the other where the tab is narrower than
# STACK_BELOW_PX (a laptop at 1024 px with the sidebar open: side by side, the zoom was 274 px wide, its
# title cut and its key labels touching). A CSS container query on the tab's own width, not the window's,
# so that the sidebar open or closed counts too; presenter mode stacks them below its own width anyway.
STACK_BELOW_PX = 900
STACK_CSS = f"""<style>
.st-key-attn_heads {{ container-type: inline-size; }}
@container (max-width: {STACK_BELOW_PX}px) {{
  .st-key-attn_heads [data-testid="stHorizontalBlock"] {{ flex-wrap: wrap; }}
  .st-key-attn_heads [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {{ min-width: 100%; flex: 1 1 100%; }}
}}
</style>"""


def heads_tab(trace, view: View, name: str) -> None:
    with st.container(key="attn_heads"):
        _heads(trace, view, name)


def _heads(trace, view: View, name: str) -> None:
    stack = quantity_stack(trace, view.kind, view.quantity, view.d_k)       # [L, H, q, k]
    q_tok, k_tok, predicts = axes(trace, view.kind)
    diverging = view.quantity in ("scores", "unscaled")
    label = QUANTITIES[view.quantity]
    st.html(STACK_CSS)                                                      # style only: takes no space
    left, right = st.columns([1, 1])
    with left:
        downloads.chart(head_grid(stack, f"All heads · {label} (click a head to zoom)", diverging=diverging,
                                  clickable=True),
                        downloads.file_stem(name, view.kind, view.quantity, "grid"), key="attn_grid",
                        on_click=lambda: zoom_clicked_head(*stack.shape[:2]))
    with right:
        matrix = stack[view.layer, view.head]
        mask = causal_mask(*matrix.shape) if attention_kind(view.kind).causal else None
        title = f"Layer {view.layer + 1}, head {view.head + 1} · {KIND_LABELS[view.kind]}"
        fig = plots.head_heatmap(matrix, q_tok, k_tok, title, quantity="scores" if diverging else "weights",
                                 mask=mask, show_mask=view.show_mask, predicts=predicts)
        stem = downloads.file_stem(name, view.kind, f"L{view.layer + 1}", f"H{view.head + 1}", view.quantity)
        downloads.chart(fig, stem, key="attn_zoom")
        downloads.csv_button(np.where(np.isfinite(matrix), matrix, np.nan), row_labels(q_tok, predicts), k_tok,
                             stem, key="attn_zoom_csv")
    if view.quantity != "weights":
        _scaling_note(trace, view)


def row_labels(q_tok: list[str], predicts: list[str] | None) -> list[str]:
    """CSV row labels: the query token, and for decoder rows the token that step wrote."""
    return q_tok if predicts is None else [f"{i}->{o}" for i, o in zip(q_tok, predicts)]


def _scaling_note(trace, view: View) -> None:
    """Why 1/√d_k: compare how peaked the softmax is with and without it, for this head."""
    weights = trace.attention(view.kind, view.layer, "weights")[0, view.head]
    raw = quantity_stack(trace, view.kind, "unscaled_softmax", view.d_k)[view.layer, view.head]
    st.caption(f"d_k = {view.d_k}, so the unscaled dot products are √{view.d_k} ≈ {math.sqrt(view.d_k):.1f}× "
               f"larger. With the scaling, this head's mean largest weight is {weights.max(-1).mean():.2f}; "
               f"without it, the softmax would give {raw.max(-1).mean():.2f}: sharper, closer to a one-hot "
               "choice, where the gradients through the softmax vanish.")


# ---- tab: head summary -----------------------------------------------------------------------------

def summary_tab(trace, view: View, name: str) -> dict:
    stats = all_stats(trace)
    rows = pd.DataFrame([{"attention": kind, **row} for kind, kind_stats in stats.items()
                         for row in stats_rows(kind_stats)])
    stat = st.selectbox("Statistic", STATS, format_func=STAT_LABELS.get, key="attn_stat")
    cols = st.columns(3)
    for col, kind in zip(cols, KINDS):
        with col:
            downloads.chart(plots.stat_heatmap(stats[kind][stat], stat, KIND_LABELS[kind]),
                            downloads.file_stem(name, kind, stat), key=f"stat_{kind}")
    st.caption("Each value is the mean over query positions. End-of-sentence means the source's </s> for "
               "encoder and cross attention, and <s> (the only boundary it can see) for decoder self-attention. "
               "Diagonality: the share of attention within one position of the length-rescaled diagonal.")
    st.dataframe(rows.round(4), hide_index=True, width="stretch", key="stats_table")
    downloads.table_csv_button(rows, downloads.file_stem(name, "head_stats"), key="stats_csv")
    return stats


# ---- tab: word alignment ---------------------------------------------------------------------------

def alignment_tab(trace, view: View, name: str) -> None:
    src, out = trace.src_tokens, trace.meta.get("out_tokens") or []
    last = trace.n_layers("cross") - 1
    cross = trace.attention("cross", last)[0]                                # [H, T, S]
    head = min(view.head, cross.shape[0] - 1)
    c1, c2 = st.columns(2)
    for col, matrix, title, stem in (
            (c1, cross.mean(axis=0), f"Mean over the heads of layer {last + 1}", "mean"),
            (c2, cross[head], f"Layer {last + 1}, head {head + 1}", f"H{head + 1}")):
        alignment = word_alignment(matrix, src, out)
        with col:
            if not alignment.tgt_words or not alignment.src_words:
                st.info("No words to align (the output or the source has only special tokens).")
                continue
            downloads.chart(plots.alignment_figure(alignment, title), downloads.file_stem(name, "alignment", stem),
                            key=f"align_{stem}")
            downloads.csv_button(alignment.matrix, alignment.tgt_words, alignment.src_words,
                                 downloads.file_stem(name, "alignment", stem), key=f"align_csv_{stem}")
    st.caption("A target word's row is the mean of its pieces' cross-attention; a source word's column sums its "
               "pieces. Circles mark each target word's most-attended source word. Attention is not alignment, "
               "but in the last layer of a trained model it often comes close.")


# ---- tab: model output vs reference ----------------------------------------------------------------

def compare_tab(ckpt, trace, view: View, reference: str | None, text: str, name: str) -> None:
    if view.kind == "encoder":
        st.info("Encoder self-attention does not depend on the target: it is the same for any translation. "
                "Pick decoder or cross-attention above to compare.")
        return
    if st.session_state.get("_attn_reference_for") != text or "attn_reference" not in st.session_state:
        st.session_state["_attn_reference_for"] = text
        url_keys.hold("attn_reference", reference or "")              # a new sentence: its own reference
    else:
        url_keys.hold("attn_reference", st.session_state["attn_reference"])
    st.text_input("Reference translation (teacher-forced)", key="attn_reference",
                  placeholder="Type the translation to force through the decoder")
    ref = st.session_state.get("attn_reference", "").strip()
    if not ref:
        st.info("Type a reference translation (or pick a test example on the Translate page) to compare.")
        return
    ids = output_ids(ckpt.tokenizer, ref, ckpt.config.max_len, ckpt.config.special)
    forced = state.friendly(models.attention, ckpt, tuple(trace.meta["src_ids"]), tuple(ids),
                            what="Tracing the reference")
    if forced is None:
        return
    cols = st.columns(2)
    for col, tr, who in ((cols[0], trace, "model output"), (cols[1], forced, "reference")):
        q_tok, k_tok, predicts = axes(tr, view.kind)
        matrix = tr.attention(view.kind, view.layer, "weights")[0, view.head]
        lp = tr.meta.get("token_logprobs") or []
        with col:
            fig = plots.head_heatmap(matrix, q_tok, k_tok, f"On the {who} · L{view.layer + 1} H{view.head + 1}",
                                     predicts=predicts)
            stem = downloads.file_stem(name, who, view.kind, f"L{view.layer + 1}", f"H{view.head + 1}")
            downloads.chart(fig, stem, key=f"cmp_{who}")
            downloads.csv_button(matrix, row_labels(q_tok, predicts), k_tok, stem, key=f"cmp_csv_{who}")
            st.caption(f"log P = {sum(lp):.2f} over {len(lp)} pieces")


# ---- tab: bertviz ----------------------------------------------------------------------------------

def bertviz_tab(trace, view: View) -> None:
    st.caption("bertviz's interactive views (Jesse Vig), served from this app with no internet. "
               "Layers and heads are numbered from 1, as everywhere else in this app.")
    if not st.toggle("Build the interactive views", key="bertviz_on"):
        return
    stacks = {kind: trace.stack(kind) for kind in KINDS}
    for label, which in (("Head view", "head"), ("Model view", "model")):
        st.markdown(f"**{label}**")
        try:
            html, note = bertviz_offline.render(which, stacks, trace.src_tokens, trace.tgt_tokens,
                                                layer=view.layer, kind=view.kind)
        except ValueError as err:
            st.warning(state.md_escape(err))
            return
        except OSError as err:                                   # e.g. an install without static/
            st.error(f"The bertviz assets could not be read ({state.md_escape(err)}); "
                     "the heatmaps above show the same data.")
            return
        if note:
            st.caption(note)
        embed(html, bertviz_offline.height(which, stacks, layer=view.layer))


def embed(html: str, height: int) -> None:
    """A self-contained HTML document in an iframe (st.iframe; components.html on older Streamlit)."""
    if hasattr(st, "iframe"):
        st.iframe(html, height=height)
    else:
        components.html(html, height=height, scrolling=True)
