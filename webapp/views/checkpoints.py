"""The Checkpoints page's parts: the table of every checkpoint, two compared (their translations, scores
under both, a test sample, how far each block's weights moved), and attention over training (one run's
checkpoints on a scrubber, the same head at each step).
"""
from __future__ import annotations


import pandas as pd
import streamlit as st

from explorer.evaluation import comparison as cmp
from explorer.config import DecodeConfig
from explorer.inspection.trace import KIND_LABELS, attention_kind
from explorer.plots import training as plots
from explorer.plots.attention import head_heatmap
from explorer.plots.style import head_grid
from webapp import downloads, models, numbering, presenter, sentence, state, tables
from webapp import url_keys as url
from webapp.text_safety import plot_escape

GREEDY = DecodeConfig(strategy="greedy").to_dict()
SHOW = {"A": "A", "B": "B", "diff": "B − A"}          # URL text -> the attention grid shown
SAMPLE_SIZES = list(range(10, 501, 10))                # the test sample's sizes offered

def _load(info):
    try:
        return models.load(info.path)
    except Exception as err:  # noqa: BLE001 - a damaged checkpoint is a message, never a traceback
        st.error(f"{state.md_escape(info.name)} cannot be loaded: {state.md_escape(err)}")
        return None


NUMBERS = {"step": "{:d}", "params (M)": "{:.2f}", "dev BLEU": "{:.2f}", "test BLEU": "{:.2f}"}


def shown(value, fmt: str = "{}", empty: str = "") -> str:
    """A table cell as text: a value the library does not know (None) is `empty` (a number column's is
    tables.EMPTY, as on every page), never "None"."""
    if value is None or (isinstance(value, float) and value != value):
        return empty
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)


def _by_name(infos) -> dict[str, int]:
    """{URL text: index} of checkpoints (state.link_names: the name, or name@path where two share a name)."""
    return {name: k for k, name in enumerate(state.link_names(infos))}


def _unknown(ckpt, text: str) -> list[str]:
    """The parts of `text` that `ckpt`'s target vocabulary reads as its unknown piece (none where its
    tokenizer cannot say)."""
    unknown = getattr(ckpt.tokenizer, "unknown", None)
    return list(unknown(text, side="tgt")) if unknown else []


def _rows(trace, kind: str) -> list[str]:
    """The query axis's labels: decoder rows by the token they write (webapp.numbering), source positions."""
    queries, _ = trace.axes(kind)
    writes = trace.meta.get("out_tokens") if attention_kind(kind).queries == "tgt" else None
    return numbering.decoder_row_labels(queries, writes) if writes else numbering.position_labels(queries)


def table(infos) -> None:
    rows = cmp.checkpoint_rows(infos)
    frame = pd.DataFrame([{k: shown(v, NUMBERS.get(k, "{}"), tables.EMPTY if k in NUMBERS else "")
                           for k, v in r.items() if k != "path"} for r in rows])
    # on a projector: the columns a lecture reads, fitted to the width (webapp.presenter.table_columns; the run,
    # size and date stay for a laptop), and the problem column only when a checkpoint has one
    widths = {"checkpoint": 250, "step": 80, "data": 130, "preset": 120, "dev BLEU": 110, "test BLEU": 110,
              **({"problem": 250} if any(r["problem"] for r in rows) else {})}
    st.dataframe(frame, hide_index=True, key="ck_table", **presenter.table_columns(widths))
    if any(r["dev BLEU"] is None for r in rows):
        st.caption(f"**dev BLEU** shows {tables.EMPTY} where it was not measured at that checkpoint's step: shipped "
                   "and imported checkpoints carry no training metrics (a shipped one keeps only its best step's), and a run "
                   "measures dev BLEU every 'eval every' steps. **test BLEU** is the beam-5 score on the held-out "
                   "test set from the checkpoint's card.json (python -m explorer evaluate writes it), "
                   f"{tables.EMPTY} where it was never evaluated.")
    bad = [r for r in rows if r["problem"]]
    if bad:
        st.warning(f"{len(bad)} damaged checkpoint(s) cannot be compared; the 'problem' column says why.")


def compare(healthy) -> None:
    if len(healthy) < 2:
        st.info("Comparison needs two working checkpoints (a run saves one every 'checkpoint every' steps).")
        return
    label = lambda i: state.checkpoint_label(healthy[i])  # noqa: E731
    c1, c2 = st.columns(2)
    first_a, first_b = cmp.default_pair(healthy, st.session_state.get("checkpoint_path"))   # the one in use vs its closest
    names = _by_name(healthy)                                                # URL text (a name) -> index
    url.seed(url.CK_A, "ck_a", first_a, options=names)
    url.seed(url.CK_B, "ck_b", first_b, options=names)
    ia = c1.selectbox("Checkpoint A", range(len(healthy)), format_func=label, key="ck_a")
    ib = c2.selectbox("Checkpoint B", range(len(healthy)), format_func=label, key="ck_b")
    url.write(url.CK_A, "ck_a", ia, names)
    url.write(url.CK_B, "ck_b", ib, names)
    a, b = _load(healthy[ia]), _load(healthy[ib])
    if a is None or b is None:
        return
    pair = downloads.file_stem(a.name, "vs", b.name)                          # first in every file's name
    if ia == ib:                         # a link or a slip of the picker: say so before drawing zeros
        st.info("A and B are the same checkpoint: the two translations are identical and every difference "
                "below is zero. Pick another checkpoint for B (e.g. an earlier step of the same run).")
    text = sentence.cut_with_notice(sentence.sentence_box("ck_text", "Sentence", st.text_input,
                                                          placeholder="Type a sentence in the source language"))
    if not text.strip():
        st.info("Type a sentence to compare the two checkpoints on it.")
        return
    ta = state.friendly(models.translate, a, text, GREEDY, trace=False, what="Translating with A")
    tb = state.friendly(models.translate, b, text, GREEDY, trace=False, what="Translating with B")
    if ta is None or tb is None:
        return
    if ta.best is None or tb.best is None:
        st.warning(ta.reason or tb.reason or "Nothing was decoded.")
        return
    pairs = {name: f"{m.meta.get('src_lang', '?')} → {m.meta.get('tgt_lang', '?')}" for name, m in (("A", a), ("B", b))}
    if pairs["A"] != pairs["B"]:
        st.warning(f"A translates {state.md_escape(pairs['A'])} and B {state.md_escape(pairs['B'])}: each reads "
                   "the other's sentences and outputs as text of another language, so the scores below compare "
                   "nothing about translation. Pick two checkpoints of one language pair.")
    c1, c2 = st.columns(2)
    for col, name, t in ((c1, "A", ta), (c2, "B", tb)):
        col.markdown(f"**{state.md_escape(name)}** (greedy): {state.md_escape(t.text)}")
        col.caption(f"log-prob {t.best.score:.2f} over {len(t.best.ids)} tokens")

    st.subheader("Per-token log-probability of each output under both models")
    for name, t in (("A", ta), ("B", tb)):
        s = models.compare_scores(a, b, text, t.text)
        tot_a, tot_b = s.totals
        if s.aligned:
            title = f"{name}'s output: total log-prob {tot_a:.2f} under A, {tot_b:.2f} under B"
            downloads.chart(plots.logprob_figure(s.pieces_a, s.lp_a, s.lp_b, title=title),
                            downloads.file_stem(pair, f"logprobs_of_{name}_output"), key=f"ck_lp_{name}")
        else:
            unknown = {m: _unknown(ck, t.text) for m, ck in (("A", a), ("B", b))}
            said = "".join(f"; {m} cannot write {len(parts)} of its parts ({state.md_escape(', '.join(parts[:5]))}"
                           f"{'…' if len(parts) > 5 else ''}), scored as its unknown piece, not as that text"
                           for m, parts in unknown.items() if parts)
            st.caption(f"{name}'s output, tokenized differently by each model: "
                       f"{tot_a:.2f} under A, {tot_b:.2f} under B{said}")
            c1, c2 = st.columns(2)
            c1.dataframe(pd.DataFrame({"token": s.pieces_a, "log p under A": s.lp_a}), hide_index=True)
            c2.dataframe(pd.DataFrame({"token": s.pieces_b, "log p under B": s.lp_b}), hide_index=True)

    st.subheader("Attention, layer × head")
    if not cmp.same_tokenizer(a.tokenizer, b.tokenizer):
        st.info("The two checkpoints use different tokenizers, so their attention is over different tokens and "
                "cannot be subtracted. Pick two checkpoints of the same run, or a fine-tune and its parent.")
    else:
        c1, c2, c3 = st.columns(3)
        url.seed(url.CK_OVER, "ck_whose", "A", options=["A", "B"])
        url.seed(url.CK_ATTN, "ck_kind", list(KIND_LABELS)[0], options=list(KIND_LABELS))
        url.seed(url.CK_SHOW, "ck_view", "B − A", options=SHOW)
        whose = c1.radio("Over the output of", ["A", "B"], horizontal=True, key="ck_whose")
        kind = c2.radio("Attention", list(KIND_LABELS), format_func=KIND_LABELS.get, key="ck_kind")
        view = c3.radio("Show", list(SHOW.values()), horizontal=True, key="ck_view")
        url.write(url.CK_OVER, "ck_whose", whose, ["A", "B"], default="A")
        url.write(url.CK_ATTN, "ck_kind", kind, list(KIND_LABELS), default=list(KIND_LABELS)[0])
        url.write(url.CK_SHOW, "ck_view", view, SHOW, default="B − A")
        out = (ta if whose == "A" else tb).best.ids
        src = ta.src_ids
        tr_a = state.friendly(models.attention, a, tuple(src), tuple(out), what="Tracing A")
        tr_b = state.friendly(models.attention, b, tuple(src), tuple(out), what="Tracing B")
        if tr_a is None or tr_b is None:
            return
        y, x = tr_a.axes(kind)
        try:
            data = {"A": tr_a.stack(kind), "B": tr_b.stack(kind)}
            if view == "B − A":
                data["B − A"] = cmp.attention_difference(tr_a, tr_b, kind)
            rows = _rows(tr_a, kind)
            downloads.chart(head_grid(data[view], f"{KIND_LABELS[kind]}: {view}", diverging=view == "B − A",
                                      q_tokens=rows, k_tokens=numbering.position_labels(x)),
                            downloads.file_stem(pair, kind, view), key="ck_grid")
        except cmp.ComparisonError as err:
            st.warning(state.md_escape(err))

    st.subheader("BLEU / chrF on a sample of the test set")
    c1, c2 = st.columns(2)
    url.seed(url.CK_N, "ck_n", 50, options=SAMPLE_SIZES)                # a link's 55: the nearest offered, 50
    url.seed(url.CK_TESTSET, "ck_testset", "A", options=["A", "B"])
    n = c1.select_slider("Test sentences", SAMPLE_SIZES, key="ck_n")
    source = c2.radio("Test set of", ["A", "B"], horizontal=True, key="ck_testset")
    url.write(url.CK_N, "ck_n", n, SAMPLE_SIZES, default=50)
    url.write(url.CK_TESTSET, "ck_testset", source, ["A", "B"], default="A")
    if st.button("Score both on the test sample", key="ck_score") or st.session_state.get("ck_scored"):
        st.session_state["ck_scored"] = True
        ref = a if source == "A" else b
        try:
            with st.spinner("Translating the test sample with both models…"):
                res = [models.compare_test(m, ref, n) for m in (a, b)]
        except cmp.ComparisonError as err:
            st.warning(state.md_escape(err))
        else:
            st.caption(f"{res[0]['n']} sentences from {state.md_escape(res[0]['where'])}, greedy decoding, "
                       "sacrebleu defaults.")
            st.dataframe(pd.DataFrame([{"model": name, "BLEU": r["bleu"], "chrF": r["chrf"], "exact": r["exact"]}
                                       for name, r in zip("AB", res)]), hide_index=True)

    st.subheader("How far the weights moved")
    try:
        change = models.param_change(a, b)
        downloads.chart(plots.param_change_figure([g for g, _ in change], [v for _, v in change]),
                        downloads.file_stem(pair, "parameter_change"), key="ck_params")
    except cmp.ComparisonError as err:
        st.info(state.md_escape(err))


def scrubber(healthy) -> None:
    runs = {group.name: group for group in cmp.runs_of(healthy)}        # run folders and shipped runs alike
    if not runs:
        st.info("No training run with checkpoints yet: start one on the Train page.")
        return
    current = st.session_state.get("checkpoint_path")
    mine = next((n for n, g in runs.items() if any(str(i.path) == current for i in g.checkpoints)), None)
    url.seed(url.CK_RUN, "ck_run", mine or next(iter(runs)), options={str(n): n for n in runs})
    run = st.selectbox("Run", list(runs), format_func=lambda r: f"{r} ({len(runs[r].checkpoints)} checkpoints)",
                       key="ck_run", help="Checkpoints saved by one training run: a run's folder under runs/, or "
                       "shipped checkpoints whose config.json names the same run.")
    url.write(url.CK_RUN, "ck_run", run, {str(n): n for n in runs})
    ckpts = list(runs[run].checkpoints)
    text = sentence.cut_with_notice(sentence.sentence_box("ck_scrub_text", "Sentence", st.text_input))
    first = _load(ckpts[0])
    if first is None:
        return
    cfg = first.config
    c1, c2, c3 = st.columns(3)
    url.seed(url.CK_KIND, "ck_s_kind", list(KIND_LABELS)[2], options=list(KIND_LABELS))
    kind = c1.selectbox("Attention", list(KIND_LABELS), format_func=KIND_LABELS.get, key="ck_s_kind")
    layers = attention_kind(kind).n_layers(cfg)
    url.seed(url.LAYER, f"ck_s_layer_{kind}", layers, high=layers)
    url.seed(url.HEAD, "ck_s_head", 1, high=cfg.n_heads)
    layer = c2.number_input("Layer", 1, layers, key=f"ck_s_layer_{kind}")
    head = c3.number_input("Head", 1, cfg.n_heads, key="ck_s_head")
    url.write(url.CK_KIND, "ck_s_kind", kind)
    url.write(url.LAYER, f"ck_s_layer_{kind}", layer)
    url.write(url.HEAD, "ck_s_head", head)
    steps = [str(step) if step is not None else i.name for step, i in zip(runs[run].steps, ckpts)]
    at = {text: i for i, text in enumerate(steps)}                          # URL text (step or name) -> index
    pos = 0
    if len(ckpts) > 1:
        url.seed(url.CK_STEP, "ck_s_step", len(ckpts) - 1, options=at)
        pos = st.select_slider("Checkpoint (training step)", range(len(ckpts)),
                               format_func=lambda i: state.md_escape(steps[i]),       # options are Markdown
                               key="ck_s_step")
        url.write(url.CK_STEP, "ck_s_step", pos, at)
    if not text.strip():
        st.info("Type a sentence to watch its attention form over training.")
        return
    ckpt = _load(ckpts[pos])
    if ckpt is None:
        return
    t = state.friendly(models.translate, ckpt, text, GREEDY, trace=False, what="The translation")
    if t is None:
        return
    if t.best is None:
        st.warning(t.reason or "Nothing was decoded.")
        return
    st.markdown(f"**Step {state.md_escape(steps[pos])}:** {state.md_escape(t.text)}")       # or a checkpoint's name
    tr = state.friendly(models.attention, ckpt, tuple(t.src_ids), tuple(t.best.ids),
                        what="Tracing")
    if tr is None:
        return
    if layer > tr.n_layers(kind) or head > tr.attention(kind, layer - 1).shape[1]:
        st.warning("This checkpoint has fewer layers or heads than the first one of the run.")
        return
    w = tr.attention(kind, layer - 1)[0, head - 1]                                  # [q, k]
    y, x = tr.axes(kind)
    writes = tr.meta.get("out_tokens") if attention_kind(kind).queries == "tgt" else None
    downloads.chart(head_heatmap(w, y, x, f"{KIND_LABELS[kind]}, layer {layer}, head {head}, "
                                          f"step {plot_escape(steps[pos])}",
                                 predicts=writes if writes and len(writes) == len(y) else None),
                    downloads.file_stem(ckpt.name, kind, f"L{layer}", f"H{head}", f"step{steps[pos]}"), key="ck_s_fig")
