"""The Contributions page's parts: where each output word comes from, the source or the decoder's own
prefix, by ALTI+ (explorer.studies.contributions) on the sentence every page shares.

- forced_output: what is teacher-forced: the model's own translation, the sentence's reference, or
  another test sentence's reference (a made-up translation: "detached" from the source);
- calibration: the checkpoint's own yardstick, the CALIBRATION_PERCENTILE-th percentile of the source
  share over its first CALIBRATION_PAIRS held-out pairs forced on their references (computed once per
  weights, webapp.models' bounded cache);
- share_section: a bar per output token and, in words, the tokens under the threshold;
- matrices_section: the rollout [source; target prefix] after a chosen decoder layer, and that layer's
  cross block beside its raw cross-attention;
- training_section: the mean source share at each checkpoint of the run, when the run shipped several.
Every control is in the URL (webapp.url_keys: forced, layer), clamped and written back.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.decoding.core import special_ids
from explorer.plots import contributions as plots
from explorer.text.encoding import output_ids
from webapp import analyses, downloads, models, sentence, state
from webapp import url_keys as url
from webapp.numbering import position_label

CALIBRATION_PAIRS = 30           # held-out pairs the threshold is measured on (~2-4 s on a small model)
CALIBRATION_PERCENTILE = 5       # a token under this percentile of the references' own tokens is flagged
FORCED = {"output": "the model's translation", "reference": "the reference translation",
          "detached": "another sentence's reference (made up for this source)"}
START_PIECE = "<start>"          # the decoder's first input, whatever the model's start id is called


def detached_reference(ckpt_path, text: str) -> str | None:
    """A held-out reference that belongs to another source: half the test set away from `text`'s own pair
    (far from its neighbouring verses), or the first pair's for a typed sentence; None without one."""
    found = sentence.examples(ckpt_path)
    wanted = text.strip()
    index = next((i for i, (_, src, _) in enumerate(found) if src.strip() == wanted), None)
    if len(found) < 2:
        return None
    _, src, ref = found[(index + len(found) // 2) % len(found) if index is not None else 0]
    return ref if ref.strip() and src.strip() != wanted else None


def forced_output(ckpt, text: str, result) -> tuple[str, list[int], str]:
    """(the choice, the forced output ids with EOS, its text) from the page's radio."""
    references = {"reference": sentence.current_reference(str(ckpt.path), text),
                  "detached": detached_reference(ckpt.path, text)}
    choices = ("output",) + tuple(k for k, v in references.items() if v)
    forced = url.seed(url.CONTRIB_FORCED, "contrib_forced", "output", options=choices)
    forced = st.radio("Teacher-forced on", choices, key="contrib_forced", format_func=FORCED.get, horizontal=True,
                      help=None if references["reference"] else "This sentence has no reference: pick a test "
                           "sentence on the Translate page, or type a reference there.")
    url.write(url.CONTRIB_FORCED, "contrib_forced", forced)
    if forced == "output":
        return forced, list(result.best.ids), result.text
    text_forced = references[forced]
    ids = output_ids(ckpt.tokenizer, text_forced, ckpt.model.cfg.max_len, special_ids(ckpt.model))
    return forced, ids, text_forced


def calibration(ckpt) -> dict | None:
    """The checkpoint's calibration (analyses.source_share_calibration), None (with a caption) without one."""
    try:
        with st.spinner(f"Measuring this checkpoint's source shares on {CALIBRATION_PAIRS} held-out pairs "
                        "(once per checkpoint)…"):
            return analyses.source_share_calibration(ckpt, CALIBRATION_PAIRS)
    except (ValueError, RuntimeError) as err:
        st.caption(f"No threshold for this checkpoint ({state.md_escape(err)}), so no token is flagged.")
        return None


def threshold_of(calib: dict | None) -> float | None:
    return None if calib is None else float(calib["percentiles"][str(CALIBRATION_PERCENTILE)])


def pieces(tokenizer, ids, side: str) -> list[str]:
    return [tokenizer.id_to_piece(int(i), side) for i in ids]


def share_section(ckpt, sc, calib: dict | None, name: str) -> None:
    """The bars, then in words: the tokens that owe little to the source."""
    out = pieces(ckpt.tokenizer, sc.out_ids, "tgt")
    share, threshold = sc.source_share, threshold_of(calib)
    fig = plots.share_bars([position_label(i, p) for i, p in enumerate(out)], share, threshold)
    downloads.chart(fig, downloads.file_stem(name, "source_share"), key="contrib_share_bars")
    words = range(len(out) - 1 if sc.out_ids[-1] == special_ids(ckpt.model).eos else len(out))
    low = [i for i in words if threshold is not None and share[i] < threshold]
    downloads.table_csv_button(pd.DataFrame({
        "position": range(1, len(out) + 1), "token": out, "source share": [round(float(v), 6) for v in share],
        "under the threshold": [i in low for i in range(len(out))]}),
        downloads.file_stem(name, "source_share"), key="contrib_share_csv", label="Source shares as CSV")
    if low:                      # one notice, a line per token: several notices would push the figures off screen
        st.warning("\n".join(f"- “{state.md_escape(out[i])}” (position {i + 1}): **this word owes little to the "
                             f"source**: {share[i]:.0%} of it comes from the source, under this checkpoint's "
                             f"threshold {threshold:.0%}." for i in low), icon=":material/flag:")
    if calib is not None:
        st.caption(f"Threshold: the {CALIBRATION_PERCENTILE}th percentile of the source share over every token of "
                   f"the first {calib['sentences']} held-out test pairs with a reference in this checkpoint's test.tsv, "
                   f"teacher-forced on their references ({calib['tokens']:,} tokens; their mean share "
                   f"{calib['mean_source_share']:.0%})."
                   + ("" if low else " No word of this output is under it.")
                   + " The end-of-sentence piece is drawn but never flagged: it is not a word.")


def matrices_section(ckpt, sc, name: str) -> None:
    """The rollout after a chosen decoder layer, and that layer's cross block beside raw cross-attention."""
    n_layers = int(sc.rollout.shape[0])
    layers = list(range(1, n_layers + 1))
    layer = url.seed(url.LAYER, "contrib_layer", n_layers, options=layers)
    layer = st.selectbox("Decoder layer", layers, key="contrib_layer",
                         help="The rollout up to this layer (the last: what the output layer reads), and this "
                              "layer's own cross-attention block.")
    url.write(url.LAYER, "contrib_layer", int(layer), options=layers)
    src = pieces(ckpt.tokenizer, sc.src_ids, "src")
    out = pieces(ckpt.tokenizer, sc.out_ids, "tgt")
    prefix = [START_PIECE] + out[:-1]
    rows = [position_label(i, p) for i, p in enumerate(out)]
    cols = [position_label(i, p) for i, p in enumerate(src)] + [position_label(i, p) for i, p in enumerate(prefix)]
    at = layer - 1
    fig = plots.contribution_heatmap(sc.rollout[at], rows, cols, n_src=sc.n_src,
                                     title=f"ALTI+ rolled out to the inputs, after decoder layer {layer}")
    downloads.chart(fig, downloads.file_stem(name, "contributions", f"L{layer}"), key="contrib_rollout")
    downloads.csv_button(sc.rollout[at], rows, cols, downloads.file_stem(name, "contributions", f"L{layer}"),
                         key="contrib_rollout_csv")
    st.caption("Each row is an output token: how much of what shaped it came from each source token (left of the "
               "line) and from each token the decoder had already written (right of it). A row sums to 1; its "
               "left part is the token's source share.")
    src_cols = cols[:sc.n_src]
    left, right = st.columns(2)
    with left:
        downloads.chart(plots.contribution_heatmap(sc.cross_source[at], rows, src_cols, quantity="contribution",
                                                   title=f"ALTI+: layer {layer}'s cross block alone"),
                        downloads.file_stem(name, "cross_contributions", f"L{layer}"), key="contrib_cross")
        downloads.csv_button(sc.cross_source[at], out, src, downloads.file_stem(name, "cross_contributions", f"L{layer}"),
                             key="contrib_cross_csv")
    with right:
        downloads.chart(plots.contribution_heatmap(sc.cross_attention[at], rows, src_cols, quantity="weight",
                                                   title=f"Raw cross-attention, layer {layer} (heads averaged)"),
                        downloads.file_stem(name, "cross_attention", f"L{layer}"), key="contrib_attention")
        downloads.csv_button(sc.cross_attention[at], out, src, downloads.file_stem(name, "cross_attention", f"L{layer}"),
                             key="contrib_attention_csv")
    st.caption("The same layer twice: what its cross-attention block's output owes to each source token once the "
               "value vectors' sizes and W^O are counted (left; its residual part left out and the rest "
               "renormalised), and the attention weights alone (right). Where they differ, the attention map is "
               "not what the block used.")


def training_section(ckpt, name: str) -> None:
    """The mean source share at each shipped checkpoint of this checkpoint's run (on a button: each
    checkpoint costs a calibration)."""
    from explorer.evaluation.comparison import runs_of

    st.subheader("Over training")
    here = Path(str(ckpt.path)).resolve()
    group = next((g for g in runs_of(state.available_checkpoints())
                  if any(Path(str(i.path)).resolve() == here for i in g.checkpoints)), None)
    if group is None or len(group.checkpoints) < 2:
        st.caption("This checkpoint has no earlier checkpoints of its run here, so there is no curve over training.")
        return
    names = ", ".join(state.md_escape(i.name) for i in group.checkpoints)      # a label is Markdown: names are text
    asked = st.session_state.setdefault("_contrib_curves", set())
    if group.name not in asked:
        if not st.button(f"Measure the mean source share at each checkpoint of the run ({names}: "
                         f"{CALIBRATION_PAIRS} held-out pairs each)", key="contrib_curve_button"):
            return
        asked.add(group.name)
    means, labels = [], []
    for info in group.checkpoints:
        loaded = state.friendly(models.load, info.path, what=f"Loading {info.name}")
        calib = loaded and state.friendly(analyses.source_share_calibration, loaded,
                                          CALIBRATION_PAIRS, what=f"The calibration of {info.name}")
        if calib is None:
            return
        means.append(calib["mean_source_share"])
        labels.append(info.name)
    current = next((k for k, i in enumerate(group.checkpoints) if Path(str(i.path)).resolve() == here), None)
    fig = plots.share_curve(labels, list(group.steps), means, current)
    downloads.chart(fig, downloads.file_stem(name, "source_share_over_training"), key="contrib_curve")
    downloads.table_csv_button(pd.DataFrame({"checkpoint": labels, "step": list(group.steps),
                                             "mean source share": [round(float(m), 6) for m in means]}),
                               downloads.file_stem(name, "source_share_over_training"), key="contrib_curve_csv",
                               label="The curve as CSV")
    st.caption(f"Each point: the mean source share over every token of a checkpoint's first {CALIBRATION_PAIRS} "
               "held-out test pairs with a reference, forced on them (the circled one is the checkpoint in use).")
