"""Attention: every head of every layer for the current sentence, and what each head does.

Thin: the sentence and decoding settings are shared with Translate (state), the trace is one
cached teacher-forced forward over the chosen translation, and each tab is a function in
webapp.views.attention. Tabs run lazily (only the open one computes).
"""
import streamlit as st

from explorer.inspection.attention_stats import stats_rows
from explorer.inspection.trace import KIND_LABELS, attention_kind
from webapp import downloads, models, presenter, sentence, state
from webapp import url_keys as url
from webapp.views import attention as views
from webapp.views import attention_ablation as ablation

st.title("Attention")
# The page's parts, placed in the order of the mode (webapp.presenter.areas; each is drawn in the script's
# own order). A student reads the Learn panel and the sentence, then explores the heads; on a projector the
# heads come first, so that the all-heads grid is on the first screen, then the Learn panel and the sentence.
area = presenter.areas(lecture=("heads", "learn", "sentence"), study=("learn", "sentence", "heads"))
with area["learn"]:
    state.learn(
        "Each head compares every query position with every key position (a dot product of learned "
        "projections), scales by $1/\\sqrt{d_k}$ so the softmax does not saturate, and turns each row into weights "
        "that sum to 1. Encoder self-attention looks over the source, the decoder's masked self-attention only "
        "at earlier target positions (the causal mask sets later ones to −∞), and cross-attention lets each "
        "target position look at the source. Rows are queries, columns keys.",
        state.equations(r"\mathrm{Attention}(Q, K, V) = "
                        r"\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right) V",
            r"M_{ij} = -\infty \text{ if } j > i \text{ (decoder self-attention)}"))

with area["sentence"]:
    ckpt = models.require_checkpoint()
    path, cfg = str(ckpt.path), state.decode_settings()
    text, clipped, result = sentence.page_translation(ckpt, "attn_text_box", cfg, "to see its attention.")
    trace = state.friendly(models.attention, ckpt, tuple(result.src_ids), tuple(result.best.ids),
                           what="Tracing the attention")
    if trace is None:
        st.stop()


TABS = ["Heads", "Head summary", "Word alignment", "Output vs reference", "Head ablation", "bertviz"]


@st.fragment
def explore(ckpt, cfg: dict, text: str, clipped: str, result, trace) -> None:
    """Everything below the translation depends on the chosen kind, layer, head and tab only. As a
    fragment, switching any of them re-runs this part alone (not the sentence box, the cached
    translation and trace lookups or the sidebar), and the browser re-draws only this part."""
    path = str(ckpt.path)
    # ---- which heads (kept in the URL: kind, layer, head, show) ------------------------------------------
    c = ckpt.config
    url.seed(url.ATTN_KIND, "attn_kind", "cross", options=list(KIND_LABELS))
    kind = st.radio("Attention", list(KIND_LABELS), format_func=KIND_LABELS.get, key="attn_kind", horizontal=True,
                    label_visibility="collapsed" if presenter.on() else "visible")    # under the title "Attention"
    n_layers = attention_kind(kind).n_layers(c)
    url.seed(url.LAYER, "attn_layer", n_layers, high=n_layers)
    url.seed(url.HEAD, "attn_head", 1, high=c.n_heads)
    url.seed(url.ATTN_SHOW, "attn_quantity", "weights", options=list(views.QUANTITIES))
    causal = attention_kind(kind).causal
    col1, col2, col3, col4 = views.control_columns(n_layers, c.n_heads, causal)
    layer = col1.radio("Layer", list(range(1, n_layers + 1)), key="attn_layer", horizontal=True)
    head = col2.radio("Head", list(range(1, c.n_heads + 1)), key="attn_head", horizontal=True)
    quantity = col3.selectbox("Show", list(views.QUANTITIES), format_func=views.QUANTITIES.get, key="attn_quantity")
    show_mask = col4 is not None and col4.toggle(
        "Causal mask", key="attn_mask", disabled=not causal,
        help="Decoder self-attention only: grey cells are future positions, set to −∞.")
    url.write(url.ATTN_KIND, "attn_kind", kind)
    url.write(url.LAYER, "attn_layer", layer)
    url.write(url.HEAD, "attn_head", head)
    url.write(url.ATTN_SHOW, "attn_quantity", quantity)
    view = views.View(kind=kind, layer=layer - 1, head=head - 1, quantity=quantity,
                      show_mask=show_mask and causal, d_k=c.d_head)
    name = downloads.file_stem(ckpt.name)

    # ---- tabs (lazy: only the open tab runs; the open tab is in the URL as ?view=..., kept by Streamlit) ---
    tabs = st.tabs(TABS, key=url.ATTN_VIEW.key, bind="query-params")
    with tabs[0]:
        if tabs[0].open:
            views.heads_tab(trace, view, name)
    with tabs[1]:
        if tabs[1].open:
            views.summary_tab(trace, view, name)
    with tabs[2]:
        if tabs[2].open:
            views.alignment_tab(trace, view, name)
    with tabs[3]:
        if tabs[3].open:
            views.compare_tab(ckpt, trace, view, sentence.current_reference(path, text), text, name)
    with tabs[4]:
        if tabs[4].open:
            ablation.ablation_tab(ckpt, clipped, cfg, result, trace, view, name)
        else:                              # its picker is not drawn: the link keeps no value of it (url_keys)
            url.put(ablate=None)
    with tabs[5]:
        if tabs[5].open:
            views.bertviz_tab(trace, view)

    def _bundle() -> dict:
        stats = views.all_stats(trace)
        extra = {"head_stats": {k: stats_rows(v) for k, v in stats.items()}}
        return downloads.analysis_bundle(ckpt, result, cfg, {"page": "attention", "kind": kind, "layer": layer,
                                                             "head": head, "quantity": quantity}, trace, extra)

    downloads.bundle_button(_bundle, downloads.file_stem(ckpt.name, "attention"), key="bundle_attention")


with area["heads"]:
    explore(ckpt, cfg, text, clipped, result, trace)
