"""Alignment: is cross-attention a word alignment, and how good a one? Scored against gold links.

Thin: gold set (the checkpoint's own, or an uploaded file) -> one sentence under the chosen aligner
(links over gold, "why this word" and how faithful each method's scores are for the word) -> the
scorecard over the gold set as a background job (its settings in the URL, about how long it takes from
webapp.estimates), shown at once when its JSON exists for the same weights, settings and gold
(webapp.views.alignment).
"""
import streamlit as st

from explorer.studies.align.job import SCORECARD, training_pairs
from explorer.studies.align.pairs import Unusable
from explorer.studies.align.scorecard import AlignSettings
from explorer.studies.align.sentence import KIND_NAMES, VARIANT_NAMES, Method
from explorer.studies.common.gradients import ATTRIBUTIONS, IG_STEPS
from webapp import analyses, downloads, estimates, models, presenter, sentence, state, study_job
from webapp import url_keys as url
from webapp.views import alignment as views

st.title("Alignment")
# The page's parts in the order of the mode (webapp.presenter.areas; each is drawn in the script's own order):
# on a projector the sentence's links and "why this word" first, then the scorecard, the Learn panel and the
# gold file's upload.
area = presenter.areas(lecture=("sentence", "scorecard", "learn", "upload"),
                       study=("learn", "upload", "sentence", "scorecard"))
with area["learn"]:
    state.learn(
        "Cross-attention is often drawn as a word alignment. Here it is **measured** as one: against gold links "
        "made by hand (or, for the numbers model, by the number grammar), with the **alignment error rate** of "
        "Och & Ney 2003 (0 is perfect; *sure* links must be found, *possible* ones may be). On large models, reading "
        "the row where a word is the decoder's *input* rather than where it is predicted (Shift-Att, Chen et al. "
        "2020) aligns much better; on the small models shipped here it is far worse, because their cross-attention "
        "already looks at the source of the word being written (the scorecard measures both). Weighting attention by "
        "the size of what each source word sends (Kobayashi et al. 2020) and gradient attributions (gradient × input, "
        "integrated gradients; a link goes to the largest attribution in size, positive or negative) are other "
        "answers to *why this word?*",
        r"\mathrm{AER} = 1 - \frac{|A \cap S| + |A \cap P|}{|A| + |S|}")

with area["upload"]:
    ckpt = models.require_checkpoint()
    path, sha = ckpt.cache_key

    own = views.shipped_gold(path, sha)
    upload = st.file_uploader("Your own gold file (one pair per line: source words ||| target words ||| links, "
                              "i-j sure, i?j possible, 0-based)", type=["align", "txt"], key="align_upload")
    if upload is not None:
        found = views.uploaded_gold(upload.getvalue(), upload.name)
        if isinstance(found, str):
            st.error(f"{state.md_escape(found)}. Remove the file (×) to go back to this checkpoint's own gold set.")
            st.stop()
        gold, gold_name, held_out = found[0], found[1], None
    elif isinstance(own, str):
        st.info(f"{state.md_escape(own)}. Upload a gold file above to score this model.")
        st.stop()
    else:
        gold, gold_name, held_out = own

with area["sentence"]:
    # ---- one sentence ---------------------------------------------------------------------------------
    st.subheader("One sentence")
    text = " ".join(sentence.current_text().split())
    match = next((k for k, p in enumerate(gold) if p.src_text == text), 0)
    digest = views.gold_digest(gold)
    gold_id = f"{sha[:12]}_{digest}"        # widgets of another gold set or model start afresh
    pair_key = f"align_pair_{gold_id}"
    k = st.selectbox(f"Sentence pair from {state.md_escape(gold_name)}: {views.count(len(gold), 'pair')}", range(len(gold)),
                     index=match,
                     key=pair_key, format_func=lambda i: f"{i + 1}: {views.cut(gold[i].src_text, 90)}",
                     on_change=lambda: sentence.set_text(gold[st.session_state[pair_key]].src_text))
    n_layers, n_heads = ckpt.model.cfg.n_decoder_layers, ckpt.model.cfg.n_heads
    MEAN = -1                                                  # "mean" in the Layer and Head boxes (None reads as unset)
    # In the URL (webapp.url_keys): aligner, row, layer and head; layer and head 1-based or "mean"
    layers = {"mean": MEAN, **{str(i + 1): i for i in range(n_layers)}}
    heads = {"mean": MEAN, **{str(i + 1): i for i in range(n_heads)}}
    url.seed(url.ALIGNER, "align_kind", next(iter(KIND_NAMES)), options=tuple(KIND_NAMES))
    url.seed(url.ALIGN_ROW, "align_variant", next(iter(VARIANT_NAMES)), options=tuple(VARIANT_NAMES))
    url.seed(url.ALIGN_LAYER, "align_layer", MEAN, options=layers)
    url.seed(url.ALIGN_HEAD, "align_head", MEAN, options=heads)
    c1, c2, c3, c4 = st.columns(4)
    kind = c1.selectbox("Aligner", tuple(KIND_NAMES), key="align_kind", format_func=KIND_NAMES.get)
    variant = c2.radio("Row read", tuple(VARIANT_NAMES), key="align_variant", horizontal=True,
                       disabled=kind in ATTRIBUTIONS, format_func=VARIANT_NAMES.get,
                       help="Where predicted: the decoder step that writes the word. Shift-Att (Chen et al. 2020): the "
                            "step that reads it as its input, one later.")
    layer = c3.selectbox("Layer", list(layers.values()), key="align_layer", disabled=kind in ATTRIBUTIONS,
                         format_func=lambda v: "mean of all" if v == MEAN else str(v + 1))
    head = c4.selectbox("Head", list(heads.values()), key="align_head",
                        disabled=kind in ATTRIBUTIONS or layer == MEAN,
                        format_func=lambda v: "mean of the layer" if v == MEAN else str(v + 1))
    url.write(url.ALIGNER, "align_kind", kind)
    url.write(url.ALIGN_ROW, "align_variant", variant)
    url.write(url.ALIGN_LAYER, "align_layer", layer, layers)
    url.write(url.ALIGN_HEAD, "align_head", head, heads)
    layer_or_mean = None if layer == MEAN else layer
    chosen = Method(kind) if kind in ATTRIBUTIONS else \
        Method(kind, variant, layer_or_mean, None if layer == MEAN or head == MEAN else head)
    methods = [chosen] + [m for m in (Method("attention", variant, layer_or_mean), Method("value-norm", variant, layer_or_mean),
                                      Method("grad-x-input")) if m != chosen]
    if kind != "integrated-gradients" and st.toggle("Add integrated gradients to “why this word” (slower)",
                                                   key="align_with_ig"):
        methods.append(Method("integrated-gradients"))
    try:
        with st.spinner("Aligning…"):
            found = analyses.align_one(ckpt, gold[k], tuple(methods), IG_STEPS)
    except Unusable as err:
        st.warning(f"This pair cannot be read by the model word for word: {state.md_escape(err)}")
    else:
        views.show_sentence(found, chosen.label(), f"align_why_{gold_id}_{k}", downloads.file_stem(ckpt.name),
                            lambda word: analyses.why_faithfulness(ckpt, gold[k], tuple(methods), IG_STEPS, word))

with area["scorecard"]:
    # ---- the scorecard --------------------------------------------------------------------------------
    st.subheader("Scorecard over the gold set")
    c1, c2 = st.columns(2)                                     # in the URL too: a link reopens the same scorecard
    url.seed(url.ALIGN_PAIRS, "align_n", min(200, len(gold)), high=len(gold))
    n_pairs = int(c1.number_input("Gold pairs (the first N)", 1, len(gold), key="align_n"))
    url.write(url.ALIGN_PAIRS, "align_n", n_pairs)
    url.seed(url.ALIGN_GRAD, "align_attr", min(24, n_pairs), high=n_pairs)
    n_attr = int(c2.number_input("Of them, scored with gradients (integrated gradients is the slow part)", 0,
                                 n_pairs, key="align_attr"))
    url.write(url.ALIGN_GRAD, "align_attr", n_attr)
    settings = AlignSettings(pairs=n_pairs, attribution_pairs=n_attr)
    out = views.result_path(sha, settings, digest)
    result = SCORECARD.read(out)
    if result is not None:
        views.show_result(result, downloads.file_stem(ckpt.name))
        st.stop()
    gradients = (f", then per target piece one backward pass (gradient × input) and {settings.ig_steps} (integrated "
                 f"gradients) for {views.count(int(n_attr), 'pair')}") if n_attr else ""
    took = estimates.scorecard(ckpt, gold, digest, settings)
    st.info(f"Not computed yet for these settings. It costs one teacher-forced pass per pair{gradients}, then eflomal "
            "learning from the training corpus (about a minute for the Bible; Cancel takes effect when it is done)."
            + (f" {took}." if took else ""))
    held = views.held_out_or_none(path, sha)
    study_job.tail(out, "Compute the scorecard", "align", lambda: study_job.start(
        SCORECARD, out, "Alignment scorecard", path, lambda _: (gold,), settings, gold_name=gold_name,
        held_out=held_out, train_pairs=lambda: training_pairs(ckpt.meta, held)))
