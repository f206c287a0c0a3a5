"""Alignment: is cross-attention a word alignment, and how good a one? Scored against gold links.

Thin: gold set (the checkpoint's own, or an uploaded file) -> one sentence under the chosen aligner
(links over gold, "why this word") -> the scorecard over the gold set as a background job, shown at
once when its JSON exists for the same weights, settings and gold (webapp.alignment_views).
"""
import streamlit as st

from explorer.align.attribution import ATTRIBUTIONS
from explorer.align.pairs import Unusable
from explorer.align.scorecard import AlignSettings
from explorer.align.sentence import Method
from webapp import alignment_views as views
from webapp import background, state

st.title("Alignment")
state.learn(
    "Cross-attention is often drawn as a word alignment. Here it is **measured** as one: against gold links "
    "made by hand (or, for the numbers model, by the number grammar), with the **alignment error rate** of "
    "Och & Ney 2003 (0 is perfect; *sure* links must be found, *possible* ones may be). Reading the row where "
    "a word is the decoder's *input* rather than where it is predicted (Shift-Att, Chen et al. 2020) often "
    "aligns much better; weighting attention by the size of what each source word sends (Kobayashi et al. "
    "2020) and gradient attributions (gradient × input, integrated gradients) are other answers to *why this word?*",
    r"\mathrm{AER} = 1 - \frac{|A \cap S| + |A \cap P|}{|A| + |S|}")

ckpt = state.require_checkpoint()
path, sha = str(ckpt.path), ckpt.sha256

own = views.shipped_gold(path, sha)
upload = st.file_uploader("Your own gold file (one pair per line: source words ||| target words ||| links, "
                          "i-j sure, i?j possible, 0-based)", type=["align", "txt"], key="align_upload")
if upload is not None:
    found = views.uploaded_gold(upload.getvalue(), upload.name)
    if isinstance(found, str):
        st.error(state.md_escape(found))
        st.stop()
    gold, gold_name, held_out = found[0], found[1], None
elif isinstance(own, str):
    st.info(f"{state.md_escape(own)}. Upload a gold file above to score this model.")
    st.stop()
else:
    gold, gold_name, held_out = own

# ---- one sentence ---------------------------------------------------------------------------------
st.subheader("One sentence")
text = " ".join(state.current_text().split())
match = next((k for k, p in enumerate(gold) if p.src_text == text), 0)
k = st.selectbox(f"Sentence pair from {gold_name} ({len(gold)} pairs)", range(len(gold)), index=match,
                 key="align_pair", format_func=lambda i: f"{i + 1}: {gold[i].src_text[:90]}")
n_layers, n_heads = ckpt.model.cfg.n_decoder_layers, ckpt.model.cfg.n_heads
c1, c2, c3, c4 = st.columns(4)
kind = c1.selectbox("Aligner", ("attention", "value-norm") + ATTRIBUTIONS, key="align_kind",
                    format_func={"attention": "cross-attention", "value-norm": "value-norm attention",
                                 "grad-x-input": "gradient × input",
                                 "integrated-gradients": "integrated gradients"}.get)
variant = c2.radio("Row read", ("naive", "shift"), key="align_variant", horizontal=True,
                   disabled=kind in ATTRIBUTIONS, format_func={"naive": "where predicted", "shift": "Shift-Att"}.get,
                   help="Naive: the decoder step that predicts the word. Shift-Att (Chen et al. 2020): the step "
                        "that reads it as its input, one later.")
layer = c3.selectbox("Layer", [None] + list(range(n_layers)), key="align_layer", disabled=kind in ATTRIBUTIONS,
                     format_func=lambda v: "mean of all" if v is None else str(v + 1))
head = c4.selectbox("Head", [None] + list(range(n_heads)), key="align_head",
                    disabled=kind in ATTRIBUTIONS or layer is None,
                    format_func=lambda v: "mean of the layer" if v is None else str(v + 1))
chosen = Method(kind) if kind in ATTRIBUTIONS else Method(kind, variant, layer, None if layer is None else head)
methods = [chosen] + [m for m in (Method("attention", variant, layer), Method("value-norm", variant, layer),
                                  Method("grad-x-input")) if m != chosen]
if kind == "integrated-gradients" or st.toggle("Add integrated gradients to “why this word” (slower)",
                                               key="align_with_ig"):
    methods += [] if kind == "integrated-gradients" else [Method("integrated-gradients")]
try:
    with st.spinner("Aligning…"):
        found = views.sentence(path, sha, gold[k], tuple(methods), True, 32)
except Unusable as err:
    st.warning(f"This pair cannot be read by the model word for word: {state.md_escape(err)}")
else:
    views.show_sentence(found, chosen.label())

# ---- the scorecard --------------------------------------------------------------------------------
st.subheader("Scorecard over the gold set")
c1, c2 = st.columns(2)
n_pairs = c1.number_input("Gold pairs (the first N)", 1, len(gold), min(200, len(gold)), key="align_n")
n_attr = c2.number_input("Of them, scored with gradients (integrated gradients is the slow part)", 0,
                         int(n_pairs), min(24, int(n_pairs)), key="align_attr")
settings = AlignSettings(pairs=int(n_pairs), attribution_pairs=int(n_attr))
out = views.result_path(sha, settings, views.gold_digest(gold))
result = views.read_result(out)
if result is not None:
    views.show_result(result)
    st.stop()
st.info(f"Not computed yet for these settings. It costs one teacher-forced pass per pair, then per target piece "
        f"one backward pass (gradient × input) and {settings.ig_steps} (integrated gradients) for {int(n_attr)} "
        "pairs, then eflomal on the training corpus (seconds to a minute).")
job = background.job_for(out)
if job is None or not job.active:
    if st.button("Compute the scorecard", key="align_start", type="primary"):
        views.start(path, state.app_device(), out, settings, gold, gold_name, held_out)
job = background.job_for(out)
st.fragment(background.show_job, run_every=2 if job is not None and job.active else None)(str(out), "align")
