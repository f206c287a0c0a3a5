"""Layers: what each layer knows, for the current sentence: the DecoderLens (a translation per encoder
layer) and the decoder's logit lens (each decoder layer's guess at each position).

Thin: the shared sentence and its translation (webapp.sentence) -> webapp.views.layers (the library
through webapp.models' cached computations -> explorer.plots.lens).
"""
import streamlit as st

from webapp import downloads, models, presenter, sentence, state
from webapp.views import layers as views

st.title("Layers")
# The page's parts in the order of the mode (webapp.presenter.areas): on a projector the sentence and its
# translation (which the table and the grid refer to as "above"), the DecoderLens table and the logit lens
# first, then the Learn panel.
area = presenter.areas(lecture=("sentence", "lens", "learn"), study=("learn", "sentence", "lens"))
with area["learn"]:
    state.learn(
        "Each encoder layer rewrites every source word's vector with what it gathered from the others, and each "
        "decoder layer refines its guess of the next word. What has each layer already worked out? The "
        "**DecoderLens** (Langedijk et al., NAACL Findings 2024) lets the decoder read encoder layer *k* instead of "
        "the last one (the embeddings for *k* = 0) and translate as usual: one whole translation per encoder layer, "
        "so \"what does layer 1 know that layer 3 does not?\" is answered in words. The **logit lens** "
        "(nostalgebraist, 2020) reads each *decoder* layer's output through the model's final projection and "
        "softmax, as if it were the last layer: a row of the grid shows a word's guess forming layer by layer.",
        state.equations(r"\text{DecoderLens: } \hat y^{(k)} = \mathrm{Decode}\big(\mathrm{Enc}_{1..k}(x)\big)",
            r"\text{logit lens: } p^{(\ell)}(y_t) = \mathrm{softmax}\big(h^{(\ell)}_t W_{\mathrm{out}} + b\big)"))

with area["sentence"]:
    ckpt = models.require_checkpoint()
    cfg = state.decode_settings()
    text, clipped, result = sentence.page_translation(ckpt, "layers_text_box", cfg, "to see what each layer knows.")
name = downloads.file_stem(ckpt.name)
with area["lens"]:
    views.decoder_lens_section(ckpt, clipped, name)
    views.logit_lens_section(ckpt, result, sentence.current_reference(str(ckpt.path), text), name)
