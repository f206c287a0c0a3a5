"""Architecture: the paper's Figure 1 drawn for the chosen model; a block chosen in it (a click, or the
radio beside it, or Previous / Next along the data's path: plots.flow_order) shows that block's real numbers
for the current sentence.

Thin: the diagram is explorer.plots.architecture's, the numbers explorer.inspection.worked's (via
webapp.views.architecture), the translation and trace the shared cached ones (state), and the block,
layer, head and token are in the URL (?block=&layer=&head=&token=).
"""
import streamlit as st

from explorer.config import paper_config
from explorer.inspection import parameters
from explorer.plots import architecture as plots
from webapp import downloads, models, presenter, sentence, state
from webapp import url_keys as url
from webapp.views import architecture as views

st.title("Architecture")
ckpt = models.current_checkpoint()
cfg = ckpt.config if ckpt is not None else paper_config("base")
if cfg.norm_first:        # M2M100 / NLLB-200 and other pre-norm models: the LayerNorm comes first, and ends each stack
    wrapped = ("each wrapped in a residual connection whose branch starts with a LayerNorm (**pre-norm**, as in "
               "M2M100 and NLLB-200: this model's order; the paper normalises after the addition), and a final "
               "LayerNorm ends each stack")
    layer = (r"\text{layer}(x) = h + \mathrm{FFN}\big(\mathrm{LN}(h)\big)",
             r"h = x + \mathrm{MultiHead}\big(\mathrm{LN}(x)\big)")
else:
    wrapped = "each wrapped in a residual connection and a LayerNorm"
    layer = (r"\text{layer}(x) = \mathrm{LN}\big(h + \mathrm{FFN}(h)\big)",
             r"h = \mathrm{LN}\big(x + \mathrm{MultiHead}(x, x, x)\big)")
state.learn(
    "The Transformer of “Attention Is All You Need” (its Figure 1), drawn for the model picked in the sidebar. "
    "The encoder reads the source: embeddings plus positions, then N identical layers of self-attention and a "
    f"feed-forward network, {wrapped}. The decoder does the same for "
    "the output so far (masked, so a position never sees later ones), with a cross-attention over the encoder's "
    "output in between, and ends in a linear layer and a softmax over the vocabulary. **Click a block** (or pick "
    "it on the right) to see its real numbers for the sentence below.",
    state.equations(*layer))


def choose_block(event_key: str) -> None:
    """A click on the diagram picks the block under it (the radio follows)."""
    chosen = plots.selected_block(st.session_state.get(event_key))
    if chosen is not None:
        st.session_state["arch_block"] = chosen


def step(order: list[str], by: int) -> None:
    """The Previous / Next buttons: the block before or after along the data's path."""
    at = order.index(st.session_state["arch_block"]) + by
    st.session_state["arch_block"] = order[min(max(at, 0), len(order) - 1)]


order = plots.flow_order(cfg.norm_first)
url.seed(url.ARCH_BLOCK, "arch_block", "enc_attn", options=order)
left, right = st.columns([3, 2])
with right:
    block = st.radio("Block", order, format_func=lambda k: plots.block_name(k, cfg.norm_first), key="arch_block")
    url.write(url.ARCH_BLOCK, "arch_block", block)
    place = order.index(block)
    back, forth = st.columns(2)
    back.button("← Previous", key="arch_step_back", on_click=step, args=(order, -1), disabled=place == 0)
    forth.button("Next →", key="arch_step_on", on_click=step, args=(order, 1), disabled=place == len(order) - 1)
    st.caption(f"Step {place + 1} of {len(order)} along the data's path"
               + (f"; next: {plots.block_name(order[place + 1], cfg.norm_first)}." if place + 1 < len(order) else
                  ": the model's output."))
hover = {}
if ckpt is not None:
    for row in parameters.parameter_rows(ckpt.model):
        hover[row.block] = hover.get(row.block, 0) + row.count
    hover = {key: f"{count:,} parameters" + (" (all layers)" if key not in ("src_embed", "tgt_embed", "generator")
                                             else "") for key, count in hover.items()}
with left:
    diagram = plots.architecture_figure(block, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.activation,
                                        cfg.norm_first, hover)
    st.plotly_chart(presenter.figure(diagram),                       # clickable: drawn here, not downloads.chart
                    key="arch_diagram", on_select=lambda: choose_block("arch_diagram"), selection_mode="points",
                    config=downloads.plotly_config(downloads.file_stem(ckpt.name if ckpt is not None else None,
                                                                       "architecture")), width="stretch")

if ckpt is None:
    st.info("Pick a working checkpoint in the sidebar to see its numbers (the diagram shows the paper's base model).")
    st.stop()

text = sentence.sentence_box("arch_text_box", "Sentence", widget=st.text_input,
                             placeholder="Type a sentence, or pick one on the Translate page.")


def block_numbers() -> None:
    """The chosen block for the current sentence; returns early (with a message) when there is none."""
    if not text.strip():
        st.info("Type a sentence above (or pick an example on the Translate page) to see the numbers of each block.")
        return
    clipped = sentence.require_text(text, "", "used")
    result = sentence.translated(ckpt, clipped, state.decode_settings())
    if result is None:
        return
    trace = state.friendly(models.attention, ckpt, tuple(result.src_ids),
                           tuple(result.best.ids), what="Tracing the model")
    if trace is None:
        return
    st.markdown("**Translation**: " + state.md_escape(result.text or "(empty)"))
    stack = plots.BLOCKS[block][1]
    tokens = trace.src_tokens if stack == "encoder" else trace.tgt_tokens
    n_layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
    st.subheader(plots.block_name(block, cfg.norm_first))
    cols = st.columns([2, 3, 3])
    url.seed(url.ARCH_TOKEN, "arch_token", 1, high=len(tokens))
    token = cols[0].selectbox("Token" if block != "generator" else "Decoder position", range(1, len(tokens) + 1),
                              format_func=lambda i: f"{i}: {tokens[i - 1]}", key="arch_token")
    url.write(url.ARCH_TOKEN, "arch_token", token)
    layer = head = 1
    if block not in ("src_embed", "tgt_embed", "generator"):     # blocks inside the N x layers
        url.seed(url.LAYER, "arch_layer", 1, high=n_layers)
        layer = cols[1].radio("Layer", list(range(1, n_layers + 1)), key="arch_layer", horizontal=True)
        url.write(url.LAYER, "arch_layer", layer)
    else:
        url.put(layer=None)
    if block in plots.ATTENTION_BLOCKS:
        url.seed(url.HEAD, "arch_head", 1, high=cfg.n_heads)
        head = cols[2].radio("Head", list(range(1, cfg.n_heads + 1)), key="arch_head", horizontal=True)
        url.write(url.HEAD, "arch_head", head)
    else:
        url.put(head=None)
    position, layer, head = token - 1, layer - 1, head - 1
    if block in ("src_embed", "tgt_embed"):
        views.embedding_view(ckpt, trace, stack, position)
    elif block in plots.ATTENTION_BLOCKS:
        views.attention_view(ckpt, trace, plots.ATTENTION_BLOCKS[block], layer, head, position)
    elif block in ("enc_ffn", "dec_ffn"):
        views.ffn_view(ckpt, trace, stack, layer, position, tokens)
    elif block in ("enc_norm", "dec_norm"):
        views.norm_view(ckpt, trace, stack, layer, position, tokens)
    else:
        views.generator_view(ckpt, trace, position, tokens)


block_numbers()
st.subheader("Parameters")
views.parameters_view(ckpt)
