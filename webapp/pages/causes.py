"""Causes: which activation carries a word from the source to the output, by activation patching on a
minimal pair (the current sentence and a one-word change of it).

Thin: the shared sentence (webapp.sentence) -> webapp.views.causes (the pair, the grids on a button
press, or at once when the app already holds them, through webapp.analyses' cached computations ->
explorer.plots.patching, a picked cell's run).
"""
import streamlit as st

from webapp import downloads, models, presenter, sentence, state
from webapp.views import causes as views

st.title("Causes")
# The page's parts in the order of the mode (webapp.presenter.areas): on a projector the pair and its grids
# first (before the grids are computed, the button that computes them), then the Learn panel, the sentences
# and the direction.
area = presenter.areas(lecture=("pair", "grids", "learn", "inputs", "direction"),
                       study=("learn", "inputs", "pair", "direction", "grids"))
with area["learn"]:
    state.learn(
        "Attention maps show where the model *looks*; they do not show what *causes* its output. **Activation "
        "patching** (Vig et al., NeurIPS 2020; Meng et al., NeurIPS 2022) asks it directly with a **minimal pair**: "
        "two sources that differ in one word (*twenty one* / *twenty two*) and translate differently. Run both, then "
        "copy one activation (one layer at one position, or one head) from one run into the other and measure how "
        "much of the difference between the two output words comes back. **Denoising** patches a clean activation "
        "into the corrupted run (is it enough to restore the word?), **noising** a corrupted one into the clean run "
        "(is it needed?). The grids show where the changed word's information travels, layer by layer, and which "
        "heads carry it across to the output (Heimersheim & Nanda 2024 explain how to read them).",
        state.equations(r"\mathrm{LD} = \log p(y_{\mathrm{clean}}) - \log p(y_{\mathrm{corrupt}})",
            r"\text{restored} = \frac{\mathrm{LD}_{\mathrm{patched}} - \mathrm{LD}_{\mathrm{corrupt}}}"
            r"{\mathrm{LD}_{\mathrm{clean}} - \mathrm{LD}_{\mathrm{corrupt}}}"))

with area["inputs"]:
    ckpt = models.require_checkpoint()
    cfg = state.decode_settings()
    box = dict(widget=st.text_input) if presenter.on() else dict(height=68)
    text = sentence.sentence_box("causes_text_box", "Clean sentence",
                                 placeholder="Type a sentence, or pick one on the Translate page.", **box)
    clipped = sentence.require_text(text, "Type a sentence above (or pick an example on the Translate page): its "
                                          "one-word changes make the minimal pairs.", "used")
    if sentence.translated(ckpt, clipped, cfg) is None:          # the notices (cut, unknown words), or why not
        st.stop()
    corrupt = views.corrupted_text(ckpt, clipped)
    if corrupt is None:
        st.stop()
with area["pair"]:
    found = views.show_pair(ckpt, clipped, corrupt)
    if found is None:
        st.stop()
    pair, info = found
with area["direction"]:
    chosen = views.direction()
with area["grids"]:
    views.grids_section(ckpt, clipped, corrupt, pair, info, chosen, downloads.file_stem(ckpt.name))
