"""Contributions: where each output word comes from, the source sentence or the decoder's own prefix
(ALTI+), on the model's translation, a reference or a made-up translation, with the words that owe
little to the source flagged against the checkpoint's own held-out references, and how faithful the
layer's maps are on the sentence (on a press).

Thin: the shared sentence and its translation (webapp.sentence) -> webapp.views.contributions (the library
through webapp.analyses' cached computations -> explorer.plots.contributions).
"""
import streamlit as st

from webapp import analyses, downloads, models, sentence, state
from webapp.views import contributions as views

st.title("Contributions")
state.learn(
    "The app draws attention everywhere, but an attention map is not an explanation (Jain & Wallace, NAACL 2019; "
    "Kobayashi et al., EMNLP 2020): a weight says how much a head *looks* at a token, not how much that token "
    "changes the result. It ignores the size of the vector it weighs (a large weight on a tiny value vector "
    "adds little), the residual connection that carries each position's own state past the block, and the "
    "mixing over layers (after layer 1, \"source position 3\" already holds the whole sentence). **ALTI+** "
    "(Ferrando, Gállego, Alastruey, Escolano & Costa-jussà, EMNLP 2022) counts all three: each attention block's "
    "output is split exactly into one vector per input token, each token's contribution is how close its "
    "vector is to the output, and the contributions are multiplied through the layers. Every output word "
    "then gets a distribution over the source tokens and the words already written; its **source share** is "
    "the part from the source. A word with a low share was made by the decoder from its own prefix — where "
    "fluent but made-up translations come from.",
    state.equations(r"c_{ij} = \frac{\max\big(0,\ \lVert y_i\rVert_1 - \lVert y_i - T_i(x_j)\rVert_1\big)}"
                    r"{\sum_k \max\big(0,\ \lVert y_i\rVert_1 - \lVert y_i - T_i(x_k)\rVert_1\big)}",
                    r"\text{source share}(t) = \sum_{j \le S} \big[C^{(L)} \cdots C^{(1)}\big]_{tj}"))

ckpt = models.require_checkpoint()
cfg = state.decode_settings()
text, clipped, result = sentence.page_translation(ckpt, "contrib_text_box", cfg,
                                                  "to see where each word of its translation comes from.")
forced, out_ids, forced_text = views.forced_output(ckpt, text, result)
if forced != "output":
    st.markdown("**Teacher-forced on:** " + state.md_escape(forced_text))
sc = state.friendly(analyses.contributions, ckpt, tuple(result.src_ids), tuple(out_ids),
                    what="The contributions")
if sc is None:
    st.stop()
name = downloads.file_stem(ckpt.name)
views.share_section(ckpt, sc, views.calibration(ckpt), name)
views.matrices_section(ckpt, sc, name)
views.training_section(ckpt, name)
