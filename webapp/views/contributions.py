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
- faithfulness_section: how faithful the layer's three source maps are on this pair (comprehensiveness and
  sufficiency of their top-k source tokens beside random orders: analyses.contribution_faithfulness,
  behind a button: seconds on the Bible model); faithfulness_table draws it, here and on the Alignment
  and Beam search pages;
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
from webapp.text_safety import md_cells

CALIBRATION_PAIRS = 30           # held-out pairs the threshold is measured on (~2-4 s on a small model)
CALIBRATION_PERCENTILE = 5       # a token under this percentile of the references' own tokens is flagged
FORCED = {"output": "the model's translation", "reference": "the reference translation",
          "detached": "another sentence's reference (made up for this source)"}
START_PIECE = "<start>"          # the decoder's first input, whatever the model's start id is called
FAITH_COLUMNS = ("attribution", "comprehensiveness", "random: comprehensiveness", "sufficiency", "random: sufficiency")
FAITH_DONE = "_contrib_faithfulness"     # the session's measured (weights, pair, layer): shown again without a press


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
    faithfulness_section(ckpt, sc, layer, name)


def faithfulness_section(ckpt, sc, layer: int, name: str) -> None:
    """How faithful the three maps of `layer` are on this pair, measured on a press (or at once when this
    session or the shared cache already has it)."""
    st.markdown(f"**How faithful are layer {layer}'s three maps on this sentence?**")
    args = (ckpt, tuple(int(i) for i in sc.src_ids), tuple(int(i) for i in sc.out_ids), int(layer))
    key = repr((ckpt.cache_key, args[1:]))
    done = st.session_state.setdefault(FAITH_DONE, [])
    offer = st.empty()
    if key not in done and not analyses.contribution_faithfulness.holds(*args):
        with offer.container():
            st.caption("Each output token is scored again on copies of the source with the tokens each map ranks "
                       "highest removed, or only those kept, and the same for random orders: a few seconds on "
                       "the shipped Bible model.")
            if not st.button(f"Measure how faithful layer {layer}'s maps are", key="contrib_faith_button"):
                return
    with st.spinner("Scoring the output on edited sources…"):
        found = state.friendly(analyses.contribution_faithfulness, *args, what="The faithfulness")
    if found is None:
        return
    offer.empty()                                                  # the offer goes once the numbers are there
    if key not in done:
        done.append(key)
        del done[:-8]                                              # the session's last few
    labels = {"rollout": f"ALTI+ rolled out after layer {layer} (source part)",
              "cross block": f"ALTI+ cross block, layer {layer}", "cross-attention": f"raw cross-attention, layer {layer}"}
    faithfulness_table([(labels.get(k, k), v, found["random"]) for k, v in found["rankings"].items()],
                       faithfulness_caption(found, "source tokens", "log p of each output token",
                                            f" and the {len(found['positions'])} output tokens"),
                       downloads.file_stem(name, "faithfulness", f"L{layer}"), "contrib_faith")


def faithfulness_frame(entries: list[tuple[str, dict, dict]]) -> pd.DataFrame:
    """A row per attribution (its label, its measures, its random baseline's: the library's
    attribution_faithfulness results), each measure beside the random order's."""
    return pd.DataFrame([{"attribution": label, "comprehensiveness": mine["comprehensiveness"],
                          "random: comprehensiveness": random["comprehensiveness"],
                          "sufficiency": mine["sufficiency"], "random: sufficiency": random["sufficiency"]}
                         for label, mine, random in entries], columns=FAITH_COLUMNS)


def faithfulness_caption(found: dict, units: str, function: str, over: str = "") -> str:
    """What the numbers mean, in one paragraph: `units` (what is removed), `function` (what falls), `over`
    (what else the means are over)."""
    ks = ", ".join(str(k) for k in found["k"])
    fractions = ", ".join(f"{f:.0%}" for f in found["fractions"])
    return (f"Remove the k {units} an attribution ranks highest (the unknown-word token in their place) and "
            f"{function} falls by its **comprehensiveness** (higher: it found what the model uses); keep only them "
            f"and it falls by its **sufficiency** (lower: they alone carry it). A faithful attribution beats "
            f"**random** orders (the mean of {len(found['random']['seeds'])}) on both. In nats, the mean over "
            f"k = {ks} ({fractions} of the {found['units']} {units}){over}.")


def faithfulness_table(entries: list[tuple[str, dict, dict]], caption: str, stem: str, key: str) -> None:
    """The faithfulness table (faithfulness_frame), its caption and its CSV."""
    frame = faithfulness_frame(entries)
    numbers = list(FAITH_COLUMNS[1:])
    st.table(md_cells(frame).style.format("{:.3f}", subset=numbers), hide_index=True)
    st.caption(caption)
    downloads.table_csv_button(frame, stem, key=f"{key}_csv", label="Faithfulness as CSV")


def training_section(ckpt, name: str) -> None:
    """The mean source share at each shipped checkpoint of this checkpoint's run (on a button: each
    checkpoint costs a calibration)."""
    st.subheader("Over training")
    here = Path(str(ckpt.path)).resolve()
    group = state.run_of_checkpoint(ckpt)
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
