"""Translate (home): type or pick a sentence, choose how to decode, see what the model produced.

Thin: widgets -> cached library calls (models.translate) -> figures from explorer.plots.
"""
import pandas as pd
import sacrebleu
import streamlit as st

from explorer.plots.translation import token_probs_figure
from explorer.store.card import model_card
from explorer.text.word_pieces import HEAVY_SPLIT, heavily_split
from webapp import decode_form, downloads, models, presenter, sentence, state, url_keys
from webapp.views import graph_links, grounding, learned

st.title("Translate")
# The page's parts, placed in the order of the mode (each part is drawn in the script's own order). A
# student reads the Learn panel, picks a sentence and settings, then sees the translation; on a
# projector the sentence and its translation come first, so the result is on the first screen, and
# the Learn panel, the examples and the settings follow.
PARTS = (("sentence", "result", "learn", "picker", "settings") if presenter.on()
         else ("learn", "picker", "sentence", "settings", "result"))
area = {part: st.container() for part in PARTS}
with area["learn"]:
    state.learn(
        "The encoder reads the source pieces once; the decoder then writes the translation one piece at a "
        "time, each step scoring every vocabulary piece given the source and what it wrote so far. Greedy "
        "keeps the single best piece, beam search keeps the *k* best partial translations, sampling draws. "
        "A hypothesis's score is the sum of its pieces' log-probabilities, usually divided by a length "
        "penalty so that short outputs are not favoured.",
        state.equations(r"\log P(y \mid x) = \sum_{t=1}^{|y|} \log P(y_t \mid y_{<t}, x)",
                        r"\text{score}_{\text{GNMT}} = \frac{\log P(y \mid x)}{\left((5 + |y|)/6\right)^{\alpha}}"))

ckpt = models.require_checkpoint()
path = str(ckpt.path)
src_lang, tgt_lang = ckpt.meta.get("src_lang") or "source", ckpt.meta.get("tgt_lang") or "target"
examples = sentence.examples(path)

# ---- input (a fresh visit opens on a test sentence the model translates well: sentence.opening_sentence) ---
# One picker per checkpoint (its key names the examples' file): another checkpoint's picker is another
# widget, so a choice made among one model's verses is never read as a choice among another's. (A
# keyed selectbox keeps its identity when its options change, and the browser sends back the label
# it shows; a label of another list comes back as a plain string.)
PICK_KEY = "example_pick:" + path


def _picked() -> None:
    pick = st.session_state.get(PICK_KEY)
    if isinstance(pick, int) and 0 <= pick < len(examples):
        sentence.set_text(examples[pick][1])


with area["picker"]:
    chosen = st.session_state.get(PICK_KEY) if examples else None
    if isinstance(chosen, int) and not (0 <= chosen < len(examples) and examples[chosen][1] == sentence.current_text()):
        chosen = None                              # the sentence was typed since: the picker shows no verse
    if examples:
        url_keys.hold(PICK_KEY, chosen)
    if examples:
        # the picker offers at most MAX_EXAMPLES pairs: "(300)" alone would read as the test set's size
        shown = f"its first {len(examples)}" if len(examples) >= sentence.MAX_EXAMPLES else str(len(examples))
        st.selectbox(f"Example from the held-out test set ({shown})", range(len(examples)), index=None,
                     key=PICK_KEY, on_change=_picked, placeholder="Pick a test sentence…",
                     format_func=lambda i: f"{examples[i][0]} · {examples[i][1][:90]}")
languages = state.md_escape(f"{src_lang} → {tgt_lang}")       # config.json's: the box's label is Markdown
with area["sentence"]:
    sentence.sentence_box("text_box", f"Sentence to translate ({languages})", height=90,
                          placeholder="Type a sentence, then press Ctrl+Enter or click outside the box.")
card = model_card(ckpt.card)                       # card.json is untrusted: never raises
domain = card.domain if card is not None else None
with area["settings"]:
    st.caption("**What this model knows:** " + (state.md_escape(domain) if domain else
               "its model card does not say; expect it to work only on text like the text it was trained on."))
    cfg, n_samples = decode_form.render()
    int8 = decode_form.int8_choice()
    # Widgets not drawn are forgotten (hence the "_" copy); and after a run that stopped before this
    # box (a checkpoint that fails to load) the browser draws it anew, so it is handed its value each run.
    linked_reference = sentence.linked_reference()
    url_keys.hold("manual_reference", linked_reference if linked_reference is not None else st.session_state.get(
        "manual_reference", st.session_state.get("_manual_reference", "")))
    with st.expander("Reference translation (optional)", expanded=bool(linked_reference)):
        typed = st.text_input("Your reference, for BLEU/chrF when the sentence is not a test example",
                              key="manual_reference")

text = sentence.current_text()
st.session_state["typed_reference"] = (text, typed)
st.session_state["_manual_reference"] = typed                  # the copy read above
sentence.put_reference(typed, sentence.reference_for(ckpt.path, text))
with area["result"]:
    clipped = sentence.require_text(text, "Type a sentence above (or pick an example) to see its translation.",
                                    "translated")

    # ---- decode (cached per checkpoint, text and settings) ------------------------------------------
    seeds = [cfg["seed"] + i for i in range(n_samples)] if cfg["strategy"] == "sample" else [cfg["seed"]]
    runs = [state.friendly(models.translate, ckpt, clipped, dict(cfg, seed=s), int8=int8, what="The translation")
            for s in seeds]
    if any(r is None for r in runs):
        st.stop()
    # every sample (or the n-best), best first; when sampling, the page shows the top-ranked sample's run
    hyps = [(s, h) for s, r in zip(seeds, runs) for h in r.hypotheses]
    drawn = len(hyps)
    if cfg["strategy"] == "sample":            # a sample drawn again is listed once, with the first seed that drew it
        unique: dict[tuple, tuple] = {}
        for s, h in hyps:
            unique.setdefault(tuple(h.ids), (s, h))
        hyps = sorted(unique.values(), key=lambda sh: -sh[1].normalized)
    result = runs[seeds.index(hyps[0][0])] if hyps and cfg["strategy"] == "sample" else runs[0]
    sentence.notices(ckpt.tokenizer, result, clipped)
    if not result.hypotheses:
        st.info(f"Nothing to translate: {result.reason or 'the text produced no tokens'}.")
        st.stop()

    st.subheader("Translation")
    found = grounding.verdict_for(ckpt, clipped, result.text)
    with st.container(key="translation", border=True):
        st.markdown("#### " + (grounding.translation_markdown(result.text, found) if result.text.strip()
                               else "*(empty output)*"))
    if int8:
        st.caption("Computed on an **int8** copy of the model (its matrix products in 8-bit integers): this "
                   "translation and everything below it (scores, n-best list, pieces, probabilities) may differ "
                   "slightly from the float32 model's, which the other pages use. Turn off *int8 weights* above "
                   "for float32.")
    if cfg["strategy"] == "sample" and len(seeds) > 1:
        repeats = drawn - len(hyps)
        st.caption(f"The best of {len(seeds)} samples by normalised log-probability (seed {hyps[0][0]}); " + (
            "all of them are ranked below." if not repeats else
            f"the {len(hyps)} different ones are ranked below, each with the first seed that drew it "
            f"({repeats} drew a translation drawn before)."))
    if not result.best.finished:
        never = cfg["min_len"] >= len(result.best.ids)        # the end was forbidden all the way to the cut
        st.caption("The output was cut at the length limit before the model ended it" + (
            f": the minimum length ({cfg['min_len']} pieces) is past that limit, so the model was never allowed "
            "to end it. Lower *Min length* in the decoding settings." if never else "."))
    grounding.show_verdict(found, result.text)

    reference = sentence.current_reference(path, text)
    if reference:
        bleu = sacrebleu.sentence_bleu(result.text, [reference]).score
        chrf = sacrebleu.sentence_chrf(result.text, [reference]).score
        c1, c2, c3 = st.columns([1, 1, 1.6] if presenter.on() else [1, 1, 4])    # room for "73.5" in large type
        c1.metric("BLEU", f"{bleu:.1f}", help="sacrebleu sentence BLEU against the reference (0-100)")
        c2.metric("chrF", f"{chrf:.1f}", help="character n-gram F-score against the reference (0-100)")
        c3.markdown("**Reference:** " + state.md_escape(reference))

# ---- n-best, pieces, per-token probabilities -------------------------------------------------------
# The ranking's own score beside the rank: after a long translation it was off-screen, and rank 3 (-9.1) over
# rank 4 (-8.38) had no visible reason.
rows = pd.DataFrame([{"rank": i + 1, "normalised": round(h.normalized, 3), "translation": h.text,
                      "log-prob": round(h.score, 3), "pieces": len(h.ids), "finished": h.finished,
                      **({"seed": s} if cfg["strategy"] == "sample" else {})} for i, (s, h) in enumerate(hyps)])
# In presenter mode one above the other: beside the pieces, the N-best table's columns scrolled sideways.
left, right = (st.container(), st.container()) if presenter.on() else st.columns([3, 2])
with left:
    st.markdown(f"**{'Samples' if cfg['strategy'] == 'sample' else 'N-best list'}** ({len(rows)})")
    st.dataframe(rows, hide_index=True, width="stretch", key="nbest")
    downloads.table_csv_button(rows, downloads.file_stem(ckpt.name, "nbest"), key="nbest_csv")
with right:
    st.markdown(f"**Source pieces** ({len(result.src_pieces)})")
    st.code(" ".join(result.src_pieces), language=None, wrap_lines=True)
    st.markdown(f"**Output pieces** ({len(result.best.pieces)})")
    st.code(" ".join(result.best.pieces), language=None, wrap_lines=True)
    heavy = heavily_split(ckpt.tokenizer, clipped)
    if heavy:
        st.caption(f"**Heavily split words** (cut into {HEAVY_SPLIT} or more pieces, punctuation not counted: "
                   "the vocabulary barely knows them, so the model reads fragments): "
                   + "; ".join(f"{state.md_escape(w.word)} → {state.md_escape(' '.join(w.pieces))}" for w in heavy))
    if presenter.advanced():                               # the raw ids: not in a lecture
        with st.expander("Token ids (piece, id)"):
            st.caption("What the model actually reads and writes: each piece's id in the vocabulary, with the "
                       "end-of-sentence id the encoding adds.")
            st.dataframe(pd.DataFrame({"source piece": result.src_pieces, "id": result.src_ids}), key="src_ids",
                         width="stretch", height=min(400, 40 + 35 * len(result.src_ids)))
            st.dataframe(pd.DataFrame({"output piece": result.best.pieces, "id": result.best.ids}), key="out_ids",
                         width="stretch", height=min(400, 40 + 35 * len(result.best.ids)))

best = result.best
downloads.chart(token_probs_figure(best.pieces, best.token_logprobs, "Per-token probability of the translation"),
                downloads.file_stem(ckpt.name, "token_probs"), key="token_probs")
probs = pd.DataFrame({"position": range(len(best.pieces)), "piece": best.pieces,
                      "log_prob": best.token_logprobs})
downloads.table_csv_button(probs, downloads.file_stem(ckpt.name, "token_probs"), key="token_probs_csv",
                           label="Download per-token probabilities (CSV)")
graph_links.word_picker(best.pieces, "translate_graph_word")     # "how was this word made?"
downloads.bundle_button(lambda: downloads.analysis_bundle(ckpt, result, cfg, {"page": "translate"},
                                                          extra={"reference": reference,
                                                                 "grounding": grounding.as_json(found)}),
                        downloads.file_stem(ckpt.name, "translation"), key="bundle_translate")
grounding.show_links(found, ckpt.name)
grounding.states_button(ckpt, found)
learned.section(ckpt, clipped, result.best, found, "translate")
