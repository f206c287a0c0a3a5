"""The Attention page's Head ablation tab: heads switched off (their output set to zero), the sentence
translated again without them, and what changed: the translation, how sure the model stays of its
original output, and the chosen head's weights. The heads live in the URL (`ablate`).
"""
from __future__ import annotations

import streamlit as st

from explorer.inspection.trace import KIND_LABELS, KINDS, attention_kind, untouched_by
from explorer.plots import attention as plots
from webapp import downloads, models, state
from webapp import url_keys as url
from webapp.views.attention import View, axes, row_labels


def _head_text(kind: str, layer: int, head: int) -> str:
    return f"{kind}.{layer + 1}.{head + 1}"                  # kind.layer.head, 1-based like the UI


def ablation_to_url(picked) -> str | None:
    """Heads as the URL keeps them: "cross.6.2,encoder.1.1"."""
    return ",".join(_head_text(*h) for h in sorted(picked)) or None


def ablation_from_url(raw, options) -> list[tuple[str, int, int]]:
    """The heads a URL names, 0-based, keeping only those among `options` (this model's heads): a
    malformed, unknown or repeated entry is dropped, never an error (url_keys.listed)."""
    by_text = {_head_text(*h): h for h in options}
    return [by_text[t] for t in url.listed(raw, list(by_text))]


def ablation_tab(ckpt, text: str, cfg: dict, result, trace, view: View, name: str) -> None:
    c = ckpt.config
    options = [(kind, layer, head) for kind in KINDS for layer in range(attention_kind(kind).n_layers(c))
               for head in range(c.n_heads)]
    picked = st.session_state.get("ablate_pick")
    if picked is None:                                         # not drawn last run: its copy, else the link's
        kept = st.session_state.get("_ablate_pick")
        picked = kept if kept is not None else ablation_from_url(url.raw(url.ATTN_ABLATE), options)
    url.hold("ablate_pick", [o for o in picked if o in options])                       # another checkpoint's dropped
    picked = st.multiselect("Heads to switch off (their output set to zero)", options, key="ablate_pick",
                            format_func=lambda o: f"{o[0]} L{o[1] + 1} H{o[2] + 1}",
                            placeholder="Pick one or more heads…")
    url.put(ablate=ablation_to_url(picked))
    st.session_state["_ablate_pick"] = picked                 # its copy, read above when it was not drawn
    if not picked:
        st.info("Pick heads in the list above: the sentence is translated again without them, and compared.")
        return
    heads = tuple(sorted(picked))
    ablated = state.friendly(models.translate, ckpt, text, cfg, ablate=heads, what="Re-translating")
    forced = state.friendly(models.attention, ckpt, tuple(result.src_ids), tuple(result.best.ids), ablate=heads,
                            what="Scoring the original output")
    if ablated is None or forced is None:
        return
    c1, c2 = st.columns(2)
    c1.markdown("**Original:** " + state.md_escape(result.text))
    c2.markdown("**Without those heads:** " + state.md_escape(ablated.text or "(empty)"))
    if ablated.text == result.text:
        st.success("Same translation without those heads (how sure the model is may still change: see below).")
    else:
        st.warning("The translation changed.")
    before = trace.meta.get("token_logprobs") or []
    after = forced.meta.get("token_logprobs") or []
    downloads.chart(plots.logprob_delta_figure(result.best.pieces, before, after,
                                               "How sure the model stays of its original output"),
                    downloads.file_stem(name, "ablation_delta"), key="ablation_delta")
    q_tok, k_tok, predicts = axes(trace, view.kind)
    diff = forced.attention(view.kind, view.layer)[0, view.head] - trace.attention(view.kind, view.layer)[0, view.head]
    fig = plots.head_heatmap(diff, q_tok, k_tok, f"Change in L{view.layer + 1} H{view.head + 1} "
                             f"({KIND_LABELS[view.kind]}) when those heads are off", quantity="difference",
                             predicts=predicts)
    stem = downloads.file_stem(name, "ablation_diff", view.kind, f"L{view.layer + 1}", f"H{view.head + 1}")
    downloads.chart(fig, stem, key="ablation_diff")
    if untouched_by(view.kind, view.layer, heads):
        st.caption(f"Zero everywhere by construction: L{view.layer + 1} H{view.head + 1} computes its weights before "
                   "any of the heads switched off can reach it (a head's output changes only the blocks after it). "
                   "Pick a later layer, or cross-attention after a decoder head, to see a change.")
    downloads.csv_button(diff, row_labels(q_tok, predicts), k_tok, stem, key="ablation_diff_csv")
