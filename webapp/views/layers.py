"""The Layers page's parts: what each layer knows, for the sentence every page shares.

- decoder_lens_section: the DecoderLens (explorer.studies.lens.decoder_lens) as a table, one translation per
  encoder depth (the embeddings first, the last layer last: that row is the model's own translation),
  greedy or by beam search (the beam size is an advanced control, hidden in presenter mode);
- logit_lens_section: the decoder's logit lens (explorer.studies.lens.logit_lens) as a grid, teacher-forced on
  the translation the page shows or on the sentence's reference, coloured by a probability.
Every control is in the URL (webapp.url_keys: beam, forced, show), clamped and written back.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explorer.decoding.core import special_ids
from explorer.plots.lens import SHOWN, lens_grid
from explorer.text.encoding import output_ids
from webapp import analyses, downloads, presenter, state
from webapp import url_keys as url
from webapp.numbering import position_label

MAX_BEAM = 8                    # the DecoderLens decodes every encoder depth at once: depths x beam rows
FORCED = {"output": "the translation above", "reference": "the reference translation"}
SHOW_LABELS = {"top": "how sure each layer is of its own guess", "final": "how likely each layer finds the final token"}


def decoder_lens_section(ckpt, text: str, name: str) -> None:
    """The table of translations per encoder depth."""
    st.subheader("DecoderLens: what the decoder makes of each encoder layer")
    beam = url.seed(url.LENS_BEAM, "layers_beam", 1, low=1, high=MAX_BEAM)
    if presenter.advanced():
        beam = st.number_input("DecoderLens beam size (1 = greedy)", 1, MAX_BEAM, key="layers_beam",
                               help="Each encoder depth is decoded on its own, greedily or by beam search; "
                                    "at most 1.5 x the source length + 10 pieces.")
    url.write(url.LENS_BEAM, "layers_beam", int(beam))
    rows = state.friendly(analyses.lens_translations, ckpt, text, int(beam),
                          what="The DecoderLens")
    if not rows:
        return
    last = rows[-1].text
    frame = pd.DataFrame({
        "the decoder reads": [r.label + (" (the model)" if i == len(rows) - 1 else "") for i, r in enumerate(rows)],
        "translation": [r.text or "(empty)" for r in rows],
        "log-prob": [round(float(r.score), 2) for r in rows],
        "as the model's": ["yes" if r.text == last else "" for r in rows],
        "finished": ["yes" if r.finished else "no (length limit)" for r in rows]})
    # on a projector: the columns a lecture reads, fitted to the width (webapp.presenter.table_columns); whether a
    # row stopped at the length limit only when one did
    widths = {"the decoder reads": 170, "translation": 520, "log-prob": 90, "as the model's": 140,
              **({"finished": 180} if not all(r.finished for r in rows) else {})}
    st.dataframe(frame, hide_index=True, width="stretch", key="layers_lens_table",
                 **presenter.table_columns(widths, wrap={"translation": frame["translation"]}))
    st.caption(f"{'Greedy' if beam == 1 else f'Beam search ({int(beam)} beams)'}: each row decodes from one encoder "
               "depth (the embeddings: no encoder layer at all). The last row is the model as trained; it can "
               "differ from the translation above, which uses the Translate page's decoding settings.")
    downloads.table_csv_button(frame, downloads.file_stem(name, "decoder_lens"), key="layers_lens_csv")


def forced_ids(ckpt, result, reference: str | None, forced: str) -> list[int]:
    """The output the logit lens reads: the translation shown (its ids, EOS included), or the reference's."""
    if forced == "reference" and reference:
        return output_ids(ckpt.tokenizer, reference, ckpt.model.cfg.max_len, special_ids(ckpt.model))
    return list(result.best.ids)


def lens_table(lens, rows: list[str], final: list[str]) -> pd.DataFrame:
    """The grid's numbers, a row per cell (target position, then decoder layer, both from 1): the layer's
    top piece and its probability, the final token's probability there and its rank (1 = the top)."""
    n_layers, n_pos = np.asarray(lens.final_logprob).shape
    top_p = np.exp(np.asarray(lens.top_logprobs, dtype=np.float64)[:, :, 0])          # [L, T]
    final_p = np.exp(np.asarray(lens.final_logprob, dtype=np.float64))                 # [L, T]
    return pd.DataFrame([{"position": rows[t], "decoder layer": layer + 1,
                          "top piece": lens.top_pieces[layer][t][0], "p(top piece)": round(float(top_p[layer, t]), 6),
                          "final token": final[t], "p(final token)": round(float(final_p[layer, t]), 6),
                          "rank of the final token": int(lens.final_rank[layer, t])}
                         for t in range(n_pos) for layer in range(n_layers)])


def logit_lens_section(ckpt, result, reference: str | None, name: str) -> None:
    """The grid: target positions down, decoder layers across."""
    st.subheader("Logit lens: what each decoder layer would write")
    choices = tuple(FORCED) if reference else ("output",)
    forced = url.seed(url.LENS_FORCED, "layers_forced", "output", options=choices)
    show = url.seed(url.LENS_SHOW, "layers_show", "top", options=tuple(SHOW_LABELS))
    c1, c2 = st.columns(2)
    forced = c1.radio("Teacher-forced on", choices, key="layers_forced", format_func=FORCED.get, horizontal=True,
                      help=None if reference else "This sentence has no reference: pick a test sentence on the "
                                                  "Translate page, or type a reference there.")
    show = c2.radio("Colour", tuple(SHOW_LABELS), key="layers_show", format_func=SHOW_LABELS.get, horizontal=True)
    url.write(url.LENS_FORCED, "layers_forced", forced)
    url.write(url.LENS_SHOW, "layers_show", show)
    out = forced_ids(ckpt, result, reference, forced)
    lens = state.friendly(analyses.logit_lens, ckpt, tuple(result.src_ids), tuple(out),
                          what="The logit lens")
    if lens is None:
        return
    written = [ckpt.tokenizer.id_to_piece(int(t), "tgt") for t in lens.out_ids]
    final = [ckpt.tokenizer.id_to_piece(int(t), "tgt") for t in lens.final_ids]
    rows = [position_label(t, p) for t, p in enumerate(written)]
    fig = lens_grid(lens.top_pieces, lens.top_logprobs, lens.final_logprob, lens.final_rank, final, rows, show)
    downloads.chart(fig, downloads.file_stem(name, "logit_lens"), key="layers_lens_grid")
    downloads.table_csv_button(lens_table(lens, rows, final), downloads.file_stem(name, "logit_lens", forced),
                               key="layers_lens_grid_csv", label="The grid as CSV")
    agreement = ", ".join(f"layer {i + 1}: {v:.0%}" for i, v in enumerate(lens.top1_agreement()))
    st.caption(f"Rows: {FORCED[forced]}, one piece per row. Each cell: the piece that decoder layer would write "
               f"there if it were the last; colour: {SHOWN[show]}. The share of positions where a layer's guess is "
               f"already the final token (top-1 agreement): {agreement}.")
