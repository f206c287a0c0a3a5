"""The Beam search page's parts: its sentence and settings, the step slider, the step view (every
candidate of the step, ranked, kept, pruned or finished; the tree), the attention of a chosen hypothesis,
forcing a candidate to re-decode from it; the contrast of a step against a foil (webapp.views.beam_contrast)
and where a reference left the beam (webapp.views.beam_fall).
"""
from __future__ import annotations

import hashlib

import streamlit as st

from explorer.plots import beams as plots
from webapp import decode_form, decode_url, downloads, models, numbering, presenter, sentence, state
from webapp import url_keys as url
from webapp.views import beam_contrast, beam_fall, graph_links, grounding, learned

PENALTIES = decode_form.PENALTIES
# Lower than the Translate page's cap (decode_form.BEAM_CAP): the tree draws 2k candidates a step,
# and beyond 12 hypotheses its branches no longer read apart.
TREE_BEAM_CAP = min(12, decode_form.BEAM_CAP)

def sentence_input() -> str:
    """The shared sentence, editable here too; cut to sentence.MAX_CHARS with a notice."""
    current = sentence.sentence_box("beam_text", "Sentence (shared with the Translate page)", widget=st.text_input)
    return sentence.cut_with_notice(current)


def settings() -> dict:
    """The shared decoding settings, with beam size / length penalty / alpha chosen here."""
    shared = state.decode_settings()
    if shared.get("strategy", "beam") != "beam":
        st.info(f"The Translate page decodes with **{state.md_escape(shared.get('strategy'))}**, which keeps no search "
                "trace: beam search is needed to watch a search. This page runs beam search with the settings below.")
    cols = st.columns(3)
    default = min(max(int(shared.get("beam_size", 5)), 1), TREE_BEAM_CAP)
    url.seed(url.BEAM_SIZE, "beam_size", default, high=TREE_BEAM_CAP)
    size = cols[0].slider("Beam size", 1, TREE_BEAM_CAP, key="beam_size")
    url.write(url.BEAM_SIZE, "beam_size", size)
    penalty = shared.get("length_penalty", "gnmt")
    alpha = min(float(shared.get("alpha", 0.6)), decode_form.ALPHA_CAP)
    if presenter.advanced():                          # presenter mode: the Translate page's penalty and α
        url.seed(url.BEAM_LP, "beam_lp", penalty if penalty in PENALTIES else PENALTIES[0], options=PENALTIES)
        penalty = cols[1].selectbox("Length penalty", PENALTIES, key="beam_lp")
        url.seed(url.BEAM_ALPHA, "beam_alpha", alpha, high=decode_form.ALPHA_CAP)
        alpha = cols[2].slider("α (GNMT exponent)", 0.0, decode_form.ALPHA_CAP, step=0.1,
                               key="beam_alpha", disabled=penalty != "gnmt")
        url.write(url.BEAM_LP, "beam_lp", penalty)
        url.write(url.BEAM_ALPHA, "beam_alpha", alpha)
    return {**shared, "strategy": "beam", "beam_size": size, "length_penalty": penalty, "alpha": alpha,
            "trace_top_k": max(int(shared.get("trace_top_k", decode_url.TRACE_TOP_K)), decode_url.TRACE_TOP_K)}


def step_slider(n_steps: int) -> int:
    """0-based step; the slider and the URL show it 1-based. Out-of-range values are clamped."""
    url.seed(url.STEP, "beam_step", 1, high=n_steps)
    if n_steps > 1:
        st.slider("Step", 1, n_steps, key="beam_step", help="Output position being chosen at this step")
    url.write(url.STEP, "beam_step", st.session_state["beam_step"])
    return st.session_state["beam_step"] - 1


def show_attention(ckpt, result, trace, row: int, piece):
    """Cross-attention of the chosen hypothesis at this step (teacher-forced over its prefix)."""
    tokens = trace.tokens(row)
    attn = state.friendly(models.attention, ckpt, tuple(result.src_ids), tuple(tokens),
                          what="The attention capture")
    if attn is None:
        return None
    n_layers = attn.n_layers("cross")
    url.seed(url.LAYER, "beam_layer", n_layers, high=n_layers)
    layer = st.selectbox("Decoder layer", range(1, n_layers + 1), key="beam_layer")
    url.write(url.LAYER, "beam_layer", layer)
    weights = attn.attention("cross", layer - 1)[0]                         # [H, T, S]
    out = [piece(t) for t in tokens]
    left, right = st.columns(2)
    with left:
        downloads.chart(plots.step_attention_figure(
            weights[:, -1], result.src_pieces, f"Producing '{plots.label(out[-1])}': cross-attention, layer {layer}"),
            downloads.file_stem(ckpt.name, f"beam_cross_step{len(tokens)}_L{layer}"), key="beam_attn_step")
    with right:
        downloads.chart(plots.prefix_attention_figure(
            weights.mean(axis=0), result.src_pieces, out, f"Whole hypothesis so far (mean of heads), layer {layer}"),
            downloads.file_stem(ckpt.name, f"beam_cross_prefix_L{layer}"), key="beam_attn_prefix")
    downloads.csv_button(weights[:, -1], ["head"] * weights.shape[0], result.src_pieces,
                         downloads.file_stem(ckpt.name, f"beam_cross_step{len(tokens)}_L{layer}"),
                         key="beam_attn_step_csv", label="This step's attention per head as CSV")
    downloads.csv_button(weights.mean(axis=0), out, result.src_pieces,
                         downloads.file_stem(ckpt.name, f"beam_cross_attention_L{layer}"),
                         key="beam_attn_csv", label="Attention (mean of heads) as CSV")
    return attn


def force_controls(ckpt, trace, row: int, step: int, piece, run_key: tuple, tag: str) -> None:
    """Pick another token for this step (from what the parent proposed, or typed) and re-decode. The pick
    starts on the best token other than the one the hypothesis already has there (forcing that one would
    change nothing); that token stays in the list, marked."""
    alts = [(t, lp) for t, lp in trace.alternatives_for(row) if t != ckpt.config.eos_id]
    *head, own = trace.tokens(row)                                          # the parent hypothesis, its token
    cols = st.columns([2, 2, 1])
    tokens = [t for t, _ in alts]
    choice = cols[0].selectbox("Alternative token at this step", tokens,
                               index=next((i for i, t in enumerate(tokens) if t != own), 0),
                               key=f"beam_alt_{step}_{row}_{tag}",
                               format_func=lambda t: f"{piece(t)}  (log p {dict(alts)[t]:.2f})"
                               + ("  · already chosen" if t == own else ""))
    typed = cols[1].text_input("…or type a word (target side)", key="beam_typed",
                               help="Encoded with the target tokenizer; all its pieces are forced.")
    if cols[2].button("Force and re-decode", key="beam_force", type="primary"):
        if typed.strip():
            forced = [int(t) for t in ckpt.tokenizer.encode(typed, side="tgt")]
        else:
            forced = [] if choice is None else [int(choice)]
        if not forced:
            st.warning("Nothing to force: pick a token or type a word.")
            return
        if ckpt.config.unk_id in forced:
            st.warning("The typed word contains a piece the vocabulary does not know (forced as <unk>).")
        st.session_state["beam_forced"] = {"key": run_key, "prefix": [int(t) for t in head + forced], "step": step}
    st.caption("`</s>` is not offered: forcing the end of the sentence is just the finished hypothesis.")


def show_forced(ckpt, text: str, cfg: dict, result, piece, run_key: tuple) -> None:
    forced = st.session_state.get("beam_forced")
    if not forced or forced["key"] != run_key:
        return
    prefix = forced["prefix"]
    other = state.friendly(models.translate, ckpt, text, cfg, tuple(prefix),
                           what="Re-decoding with the forced prefix")
    if other is None or other.best is None:
        return
    st.subheader(f"Forced from step {forced['step'] + 1}: original vs forced")
    left, right = st.columns(2)
    for col, name, res in ((left, "Original", result), (right, "Forced", other)):
        best = res.best
        col.markdown(f"**{name}**")
        col.code(best.text or "(empty)", language=None, wrap_lines=True)      # a long sentence wraps
        col.caption(f"score {best.score:.3f} · normalised {best.normalized:.3f} · {len(best.ids)} tokens"
                    + ("" if best.finished else " · not finished"))
    right.caption("Forced prefix: " + state.md_escape(" ".join(piece(t) for t in prefix)))
    downloads.chart(plots.compare_figure({"original": (result.best.pieces, result.best.token_logprobs),
                                          "forced": (other.best.pieces, other.best.token_logprobs)}),
                    downloads.file_stem(ckpt.name, "beam_original_vs_forced"), key="beam_compare")
    if other.beam_trace is not None:
        with st.expander("The forced search's tree"):
            downloads.chart(plots.tree_figure(other.beam_trace, piece, title="Beam search after forcing"),
                            downloads.file_stem(ckpt.name, "beam_tree_forced"), key="beam_forced_tree")


def main() -> None:
    ckpt = models.require_checkpoint()
    # In presenter mode the sentence and the search's settings fold away, so that the tree starts on the
    # projector's first screen (the teacher opens them to change the sentence or the beam).
    with st.expander("Sentence and search settings") if presenter.on() else st.container():
        text = beam_fall.verse_picker(ckpt, sentence_input())
        cfg = settings()
    if not text.strip():
        st.info("Type a sentence above (or on the Translate page) to watch beam search translate it.")
        return
    result = sentence.translated(ckpt, text, cfg, what="Beam search")
    if result is None:
        return
    trace = result.beam_trace
    if trace is None or trace.n_steps == 0:
        st.info(result.reason or "No beam trace: beam search is needed to show one (greedy and sampling keep none).")
        return
    piece = lambda t: ckpt.tokenizer.id_to_piece(int(t), "tgt")            # noqa: E731
    st.markdown("**Best:** " + (state.md_escape(result.best.text) if result.best.text.strip() else "*(empty output)*"))
    st.caption(f"{trace.n_steps} steps · beam {trace.beam_size} · length penalty {trace.length_penalty}"
               f" (α={trace.alpha:g})")
    st.markdown(f"**Why the search stopped:** {plots.stop_reason_text(trace.stop_reason)}.")
    run_key = (ckpt.sha256, text, tuple(sorted(cfg.items())))
    tag = hashlib.sha1(repr(run_key).encode()).hexdigest()[:8]             # per-search widget keys: rows differ
    url.seed(url.BEAM_MARK, "beam_follow", False, options=(False, True))
    follow = st.toggle("Mark the step and hypothesis in the tree", key="beam_follow",
                       help="Draws a line at the chosen step and rings the chosen hypothesis. The browser then "
                            "redraws the whole tree on every step change, which is slow for long searches; off, "
                            "the tree stays as it is while you step through the candidates below.")
    url.write(url.BEAM_MARK, "beam_follow", follow)
    if not follow:
        tree_chart(plots.tree_figure(trace, piece), trace, tag, ckpt.name)
    frame = numbering.one_based_trace(trace.to_dataframe(piece).astype({"status": str}))
    downloads.table_csv_button(frame, downloads.file_stem(ckpt.name, "beam_trace"), key="beam_csv",
                               label="Whole trace as CSV")
    st.fragment(step_view)(ckpt, text, cfg, result, piece, frame, run_key, tag, follow)
    beam_fall.fall_section(ckpt, text, cfg, piece)
    learned.section(ckpt, text, result.best, grounding.verdict_for(ckpt, text, result.best.text), "beam")


def tree_chart(fig, trace, tag: str, name: str) -> None:
    """The tree; a click on a node picks it as the foil of the step's contrast (beam_contrast.tree_click).
    Its numbers: the whole trace's CSV."""
    beam_contrast.undimmed(fig)
    downloads.chart(fig, downloads.file_stem(name, f"beam_tree_k{trace.beam_size}"), key="beam_tree",
                    on_click=beam_contrast.tree_click(fig, trace, tag, "beam_tree"))


def _tail(prefix: str, limit: int = 36) -> str:
    """The end of a hypothesis's prefix, where hypotheses differ: the cell showed its start ("▁Yahweh ▁God
    ▁ca...") in every row, cut at the column's width, and which hypothesis a candidate extends was unseen."""
    return prefix if len(prefix) <= limit else "…" + prefix[-limit:]


def step_view(ckpt, text: str, cfg: dict, result, piece, frame, run_key: tuple, tag: str, follow: bool) -> None:
    """One step of the search: its candidates, the chosen hypothesis's attention, forcing.

    A fragment: moving the step slider or picking another hypothesis re-runs (and the browser
    re-draws) only this part, not the sentence, the settings, the cached search or the tree.
    """
    trace = result.beam_trace
    step = step_slider(trace.n_steps)
    table = plots.step_table(trace, step, piece)
    table["rank"] += 1                                                      # ranks count from 1, like steps
    best_rows = set(trace.best_path())
    rows = [int(r) for r in table["row"]]
    by_rank = {str(int(k)): int(r) for k, r in zip(table["rank"], rows)}    # URL text (the rank) -> row
    widget = f"beam_row_{step}_{tag}"
    url.seed(url.BEAM_RANK, widget, next((r for r in rows if r in best_rows), rows[0]), options=by_rank)
    row = st.selectbox("Hypothesis at this step", rows, key=widget, format_func=lambda r: _row_label(table, r))
    url.write(url.BEAM_RANK, widget, row, options=by_rank)
    if follow:
        tree_chart(plots.tree_figure(trace, piece, step=step, highlight=[row]), trace, tag, ckpt.name)
    st.subheader(f"Candidates ranked at step {step + 1}")
    shown = table.drop(columns=["row"]).assign(extends=table["extends"].map(_tail))
    st.dataframe(shown, hide_index=True, key="beam_table")       # sized to its cells: fits 1024 px in presenter mode
    if row in best_rows:                           # a word of the final translation: its attribution graph
        graph_links.word_link(step, str(table[table["row"] == row].iloc[0]["token"]), cfg)
    beam_contrast.contrast_section(ckpt, result, trace, row, step, piece, tag)
    st.subheader("Cross-attention of the chosen hypothesis")
    attn = show_attention(ckpt, result, trace, row, piece)
    view = {"page": "beam", "step": step + 1, "row": int(row), "hypothesis": trace.tokens(row)}
    downloads.bundle_button(lambda: downloads.analysis_bundle(
        ckpt, result, cfg, view, attn, extra={"beam_trace": frame.to_dict("list")}),
        downloads.file_stem(ckpt.name, "beam_analysis"), key="beam_bundle")
    st.subheader("Force another token here")
    force_controls(ckpt, trace, row, step, piece, run_key, tag)
    show_forced(ckpt, text, cfg, result, piece, run_key)


def _row_label(table, row: int) -> str:
    r = table[table["row"] == row].iloc[0]
    return f"rank {r['rank']}: {r['extends']} + {r['token']} ({r['status']}, norm {r['normalised']:.2f})"
