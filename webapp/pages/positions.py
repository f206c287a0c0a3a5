"""Positional encoding: the table the model adds, its wavelengths and similarities, and its size
next to the token embeddings of the current sentence.

Positions count from 1 here as on every page (webapp.numbering): position 1 is the first token, whose
row of the table is the formula's pos = 0. The sliders and the side are in the URL (webapp.url_keys).

Thin: widgets -> explorer.inspection.positions (numpy) / cached models.translate + models.attention ->
explorer.plots.positions. Works without a checkpoint too (paper defaults), since the sinusoidal
table needs none; only the sentence section needs a model.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.inspection import positions as pe
from explorer.plots import positions as plots
from webapp import downloads, models, sentence, state
from webapp import url_keys as url

D_MODELS = (16, 32, 64, 128, 256, 512, 768, 1024)
BASES = (100.0, 1000.0, 10000.0, 100000.0)

st.title("Positional encoding")
state.learn(
    "Attention by itself does not know word order, so each token's vector gets a position vector added. "
    "The paper uses sines and cosines whose wavelengths grow geometrically from 2π to about 2π·base "
    "across the dimensions: low dimensions change fast, high ones slowly, and PE(pos + k) is a fixed "
    "linear function (a rotation per sin/cos pair) of PE(pos), so relative offsets are easy to read.",
    # one equation a line, as the paper writes them (pos / base^...): on one line the four were wider than the
    # page (1033 px), cut even at 1400 px. An array: KaTeX's multi-line environments run 2 px past their box.
    state.equations(r"PE_{(pos,\,2i)} = \sin\!\left(pos / \mathrm{base}^{2i/d_{model}}\right)",
        r"PE_{(pos,\,2i+1)} = \cos\!\left(pos / \mathrm{base}^{2i/d_{model}}\right)",
        r"\lambda_i = 2\pi\,\mathrm{base}^{2i/d_{model}}",
        r"x_{pos} = \sqrt{d_{model}}\,E[w_{pos}] + PE_{pos}"))


def matrix_button(table, label: str, name: str, key: str) -> None:
    """A [positions, dims] table as CSV: rows are positions from 1 (pos + 1), columns the formula's dims."""
    downloads.csv_button(table, [f"position {i + 1}" for i in range(table.shape[0])],
                         [f"dim{j}" for j in range(table.shape[1])], name, key=key, label=label)


def model_defaults(ckpt) -> tuple[int, float, int]:
    if ckpt is None:
        st.caption("No checkpoint loaded: showing the paper's d_model=512, base=10000.")
        return 512, 10000.0, 512
    cfg = ckpt.config
    st.caption(f"Checkpoint **{state.md_escape(ckpt.name)}**: d_model={cfg.d_model}, base={cfg.pe_base:g}, "
               f"positions={cfg.positions}, max_len={cfg.max_len}.")
    if cfg.positions == "sinusoidal" and (cfg.pe_frequencies != "paper" or cfg.pe_offset):
        st.caption(f"This model's own sinusoids (M2M100 / NLLB) are fairseq's: frequencies 1 / base^(i/(d/2 − 1)) "
                   f"in [sin | cos] halves, the first token at pos = {cfg.pe_offset}; the explorer below draws the "
                   "paper's, the sentence below what this model adds.")
    return cfg.d_model, float(cfg.pe_base), cfg.max_len


def learned_section(ckpt, n_positions: int) -> None:
    st.info("This checkpoint **learns** its positions (a trained table, one row per position) instead of "
            "the sinusoids: its encoder's table is shown here; the sinusoidal explorer below is for comparison.")
    table = pe.learned_table(ckpt.model, "encoder")[:n_positions]          # [L, d]
    name = downloads.file_stem(ckpt.name, "learned_positions")                # this checkpoint's own table
    downloads.chart(plots.pe_heatmap(table, "Learned position table (encoder)"), name, key="pe_learned")
    downloads.chart(plots.similarity_heatmap(pe.similarity(table), "Learned table: PE(i) · PE(j)"),
                    downloads.file_stem(ckpt.name, "learned_similarity"), key="pe_learned_sim")
    matrix_button(table, "Learned table as CSV", name, "pe_learned_csv")


def sinusoid_section(d_model: int, base: float, n_positions: int) -> None:
    table = pe.sinusoidal(n_positions, d_model, base)                       # [L, d]
    name = f"pe_d{d_model}_base{base:g}"
    waves = pe.dimension_wavelengths(d_model, base)                         # [d]
    heat, curves, sim, waves_tab = st.tabs(["Heatmap", "Dimensions", "Similarity", "Wavelengths"])
    with heat:
        downloads.chart(plots.pe_heatmap(table, f"PE for d_model={d_model}, base={base:g}"), f"{name}_table",
                        key="pe_heatmap")
        matrix_button(table, "Table as CSV", f"{name}_table", "pe_table_csv")
    with curves:
        default = sorted({0, 1, min(4, d_model - 2), d_model // 2, d_model - 2})
        dims = st.multiselect("Dimensions", list(range(d_model)), default=default, key="pe_dims")
        dims = [d for d in dims if d < d_model]
        if dims:
            downloads.chart(plots.dimension_curves(table, dims, waves), f"{name}_dimensions", key="pe_curves")
        else:
            st.info("Pick one or more dimensions.")
    with sim:
        downloads.chart(plots.similarity_heatmap(pe.similarity(table)), f"{name}_similarity", key="pe_similarity")
        st.caption("Constant along every diagonal: PE(i)·PE(j) = Σ cos(ω_k (i − j)) depends only on the offset.")
        if d_model % 2 == 0:
            downloads.chart(plots.offset_figure(pe.offset_profile(d_model, base, n_positions - 1)),
                            f"{name}_offsets", key="pe_offset")
        sim_matrix = pe.similarity(table)
        numbered = [f"position {i + 1}" for i in range(n_positions)]
        downloads.csv_button(sim_matrix, numbered, numbered, f"{name}_similarity", key="pe_sim_csv",
                             label="Similarity matrix as CSV")
    with waves_tab:
        pairs = pe.wavelengths(d_model, base)
        downloads.chart(plots.wavelength_figure(pairs, base, d_model), f"{name}_wavelengths", key="pe_waves")
        st.caption(f"From 2π ≈ 6.28 positions (pair 0) to {pairs[-1]:,.0f} positions (pair {len(pairs) - 1}).")
        downloads.table_csv_button(pd.DataFrame({"pair": range(len(pairs)), "wavelength": pairs}),
                                   f"{name}_wavelengths", key="pe_waves_csv", label="Wavelengths as CSV")


def sentence_section(ckpt) -> None:
    st.subheader("This sentence: token embedding vs positional encoding")
    if ckpt is None:
        st.info("Pick a working checkpoint in the sidebar to compare norms on a sentence.")
        return
    text, _ = sentence.clip_text(sentence.current_text())
    if not text.strip():
        st.info("Type a sentence on the Translate page (or add ?text=… to the URL) to see its norms.")
        return
    result = sentence.translated(ckpt, text, state.decode_settings(), what="Translating the sentence")
    if result is None:                       # translated() said why (and what the model could not read)
        return
    trace = state.friendly(models.attention, ckpt, tuple(result.src_ids),
                           tuple(result.best.ids), what="The capture")
    if trace is None:
        return
    sides = {"encoder": "encoder (source)", "decoder": "decoder (output)"}
    url.seed(url.PE_SIDE, "pe_side", "encoder", options=tuple(sides))
    stack = st.radio("Side", tuple(sides), format_func=sides.get, horizontal=True, key="pe_side")
    url.write(url.PE_SIDE, "pe_side", stack)
    tokens = trace.src_tokens if stack == "encoder" else trace.tgt_tokens
    tok_norm, pos_norm = pe.embedding_norms(trace, stack)
    name = downloads.file_stem(ckpt.name, f"norms_{stack}")
    downloads.chart(plots.norm_bars(tokens, tok_norm, pos_norm), name, key="pe_norms")
    cols = st.columns(3)
    cols[0].metric("mean ‖√d·E[token]‖", f"{tok_norm.mean():.2f}")
    cols[1].metric("mean ‖PE(pos)‖", f"{pos_norm.mean():.2f}")
    cols[2].metric("ratio", f"{tok_norm.mean() / max(pos_norm.mean(), 1e-9):.2f}")
    st.caption(f"Capture points `{stack}.embed.tokens` and `{stack}.embed.positions`. A sinusoidal PE has norm "
               "√(d/2) at every position; scaling the embedding by √d keeps the token from being drowned by it.")
    norms = pd.DataFrame({"position": range(1, len(tokens) + 1), "token": tokens, "token_norm": tok_norm,
                          "position_norm": pos_norm})
    downloads.table_csv_button(norms, name, key="pe_norms_csv", label="Norms as CSV")
    view = {"page": "positions", "side": stack, "d_model": ckpt.config.d_model, "base": ckpt.config.pe_base,
            "positions": ckpt.config.positions}
    downloads.bundle_button(lambda: downloads.analysis_bundle(
        ckpt, result, state.decode_settings(), view, trace, extra={"norms": norms.to_dict("list")}),
        downloads.file_stem(ckpt.name, f"positions_{stack}"), key="pe_bundle")


def main() -> None:
    ckpt = models.current_checkpoint()
    d_default, base_default, max_len = model_defaults(ckpt)
    cols = st.columns(3)
    d_options, base_options, longest = sorted({*D_MODELS, d_default}), sorted({*BASES, base_default}), max(max_len, 8)
    url.seed(url.PE_D, "pe_d", d_default, options=d_options)
    url.seed(url.PE_BASE, "pe_base", base_default, options={url.UrlKey.text(b): b for b in base_options})
    url.seed(url.PE_LEN, "pe_len", min(100, longest), high=longest)
    d_model = cols[0].select_slider("d_model", d_options, key="pe_d")
    base = cols[1].select_slider("base", base_options, key="pe_base",
                                 format_func=lambda b: f"{b:g}" + (" (paper)" if b == 10000 else ""))
    n_positions = cols[2].slider("positions shown", 8, longest, key="pe_len",
                                 help="Position 1 is the first token (the formula's pos = 0).")
    url.write(url.PE_D, "pe_d", d_model)
    url.write(url.PE_BASE, "pe_base", base, options={url.UrlKey.text(b): b for b in base_options})
    url.write(url.PE_LEN, "pe_len", n_positions)
    if ckpt is not None and ckpt.config.positions == "learned":
        learned_section(ckpt, n_positions)
    sinusoid_section(int(d_model), float(base), int(n_positions))
    sentence_section(ckpt)


main()
