"""The sections of the Architecture page, one function per kind of block (the page only wires them).

Each takes the model, the Trace of the current sentence and the chosen layer / head / token
(0-based), asks explorer.inspection.worked for plain numbers and draws them with
explorer.plots.architecture. Every worked number is shown beside the captured value it must equal.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explorer.config import PAPER_MODELS, PAPER_VOCAB, paper_config
from explorer.decoding.translate import pieces
from explorer.inspection import parameters, worked, worked_attention
from explorer.inspection.trace import KIND_LABELS
from explorer.plots import architecture as plots
from webapp import downloads, presenter, state

SHOWN_DIMS = 8          # vector entries written out in tables (figures show them all)
TOP_K = 10


def _diff(value: float) -> str:
    return f"{value:.1e}"


def embedding_view(ckpt, trace, stack: str, position: int) -> None:
    w = state.friendly(worked.worked_embedding, ckpt.model, trace, stack, position, what="The embedding")
    if w is None:
        return
    scale = (f"× √d_model = √{ckpt.config.d_model} = {w.scale:.4g}" if ckpt.config.scale_embeddings
             else "× 1 (this model does not scale its embeddings: scale_embeddings is off)")
    pe = (f"sinusoidal ({w.layout} layout: " + ("sin on even, cos on odd dimensions)" if w.layout == "interleaved"
                                                 else "all sines, then all cosines)")
          if w.positions == "sinusoidal" else "learned (a trained row per position)")
    st.markdown(f"Token **{state.md_escape(w.token)}** (id {w.token_id}) at position {position + 1}: its row of the "
                f"embedding matrix {state.md_escape(scale)}, plus the positional encoding PE(pos = {position}) "
                f"(the formula counts positions from 0), "
                f"{state.md_escape(pe)}.")
    if stack == "decoder":
        st.caption("The decoder's inputs are the output shifted right: the start token, then every output "
                   "token but the last, so position i predicts output token i.")
    norms = w.norms
    cols = st.columns(4)
    cols[0].metric("‖E[token]‖", f"{norms['row']:.3f}")
    cols[1].metric("‖scaled token‖", f"{norms['scaled']:.3f}")
    cols[2].metric("‖PE(pos)‖", f"{norms['pe']:.3f}")
    cols[3].metric("‖sum‖ = ‖embed.out‖", f"{norms['total']:.3f}")
    downloads.chart(plots.vectors_figure([w.scaled, w.pe, w.total], ["token × scale", "PE(pos)", "sum"],
                                         f"{stack} input at position {position + 1}"),
                    downloads.file_stem(ckpt.name, f"embedding_{stack}_{position + 1}"),
                    key="arch_embed")
    table = pd.DataFrame({"dimension": range(SHOWN_DIMS), "E[token]": w.row[:SHOWN_DIMS],
                          "× scale": w.scaled[:SHOWN_DIMS], "+ PE": w.pe[:SHOWN_DIMS],
                          "= sum": w.total[:SHOWN_DIMS], f"captured {stack}.embed.out": w.captured_out[:SHOWN_DIMS]})
    st.dataframe(table, hide_index=True, key="arch_embed_table")
    st.caption(f"The first {SHOWN_DIMS} of {len(w.total)} dimensions. Largest difference between the sum "
               f"worked out here and the captured `{stack}.embed.out`: {_diff(w.error)}.")


def attention_view(ckpt, trace, kind: str, layer: int, head: int, query: int) -> None:
    w = state.friendly(worked_attention.worked_attention, ckpt.model, trace, kind, layer, head, query, what="The attention")
    if w is None:
        return
    st.markdown(f"**{KIND_LABELS[kind]}**, layer {layer + 1}, head {head + 1} of {ckpt.config.n_heads}; query: "
                f"position {query + 1}, **{state.md_escape(w.query_token)}**. Q, K and V are the layer's own "
                "projections $W_Q$, $W_K$, $W_V$ of what the sublayer reads"
                + (" (the stream, normalised first: this model is pre-norm)" if ckpt.config.norm_first else "")
                + (", keys and values of the encoder's output." if kind == "cross" else "."))
    best = int(np.nanargmax(np.where(w.masked, -np.inf, w.scores)))
    st.latex(state.equations(rf"d_k = {w.d_k},\ \sqrt{{d_k}} = {w.sqrt_d_k:.4g}",
                             rf"q\cdot k_{{{best + 1}}} = {w.dots[best]:.4f},\ \ \frac{{{w.dots[best]:.4f}}}"
                             rf"{{{w.sqrt_d_k:.4g}}} = {w.scores[best]:.4f}\ \xrightarrow{{\text{{softmax}}}}\ "
                             rf"{w.weights[best]:.4f}"))
    st.caption(f"Key {best + 1} ({state.md_escape(w.key_tokens[best])}) gets the largest weight. Every key below; "
               "masked keys "
               "(later positions in the decoder's self-attention) get score −∞ and weight 0.")
    table = pd.DataFrame({
        "key": [f"{i}: {t}" for i, t in enumerate(w.key_tokens, 1)],
        "q·k": np.where(w.masked, np.nan, w.dots),
        "score = q·k / √d_k": np.where(w.masked, np.nan, w.scores),
        "captured score": np.where(w.masked, np.nan, w.captured_scores),
        "weight = softmax": w.weights,
        "captured weight": w.captured_weights,
        "masked": w.masked})
    st.dataframe(table, hide_index=True, key="arch_attn_table")
    downloads.chart(plots.attention_figure(w.key_tokens, w.scores, w.weights,
                                           f"Query {query + 1}: scores and weights (head {head + 1})"),
                    downloads.file_stem(ckpt.name, f"attention_{kind}_L{layer + 1}_H{head + 1}_q{query + 1}"),
                    key="arch_attn")
    n = min(SHOWN_DIMS, w.d_k)
    context = pd.DataFrame({"dimension": range(n), "q": w.q[:n], "Σ weight·v = context": w.context[:n],
                            "captured context": w.captured_context[:n]})
    st.markdown(f"**This head's context vector** (the weighted sum of the {len(w.key_tokens)} value vectors; "
                f"the first {n} of {w.d_k} dimensions):")
    st.dataframe(context, hide_index=True, key="arch_context_table")
    errors = w.errors
    st.caption("Largest difference from the captured tensors: scores "
               f"{_diff(errors['scores'])}, weights {_diff(errors['weights'])}, context {_diff(errors['context'])}.")
    if presenter.advanced():                                 # the raw vectors: not in a lecture
        with st.expander(f"Q, K and V of head {head + 1} (all {w.d_k} dimensions)"):
            st.dataframe(pd.DataFrame(w.q[None, :], index=["q"]), key="arch_q")
            st.dataframe(pd.DataFrame(w.k, index=[f"k {i}: {t}" for i, t in enumerate(w.key_tokens, 1)]), key="arch_k")
            st.dataframe(pd.DataFrame(w.v, index=[f"v {i}: {t}" for i, t in enumerate(w.key_tokens, 1)]), key="arch_v")
    heads_view(ckpt, trace, kind, layer, head, query)


def heads_view(ckpt, trace, kind: str, layer: int, head: int, query: int) -> None:
    out = state.friendly(worked_attention.heads_output, ckpt.model, trace, kind, layer, query, what="The output projection")
    if out is None:
        return
    h, d = ckpt.config.n_heads, ckpt.config.d_model
    st.markdown(f"**All {h} heads together**: their contexts side by side ({h} × {d // h} = {len(out.concat)} "
                f"values), times $W^O$ ({len(out.concat)} × {d}) plus its bias, is the attention's output.")
    st.latex(r"\mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O")
    # words, not sub/superscripts: plotly draws those at 70 % of the title's size, too small on a projector
    share = "Each head's share of the output: ‖its context × its rows of the output projection‖"
    downloads.chart(plots.bars_figure([f"head {i + 1}" for i in range(h)], out.head_norms, share, "L2 norm",
                                      highlight=head),
                    downloads.file_stem(ckpt.name, f"heads_{kind}_L{layer + 1}_q{query + 1}"), key="arch_heads")
    st.caption(f"‖output‖ = {np.linalg.norm(out.projected):.3f}. Largest difference between Concat(heads) $W^O$ + b "
               f"worked out here and the captured `out`: {_diff(out.error)}.")


def ffn_view(ckpt, trace, stack: str, layer: int, position: int, tokens: list[str]) -> None:
    w = state.friendly(worked.worked_ffn, trace, ckpt.config, stack, layer, position, what="The feed-forward")
    if w is None:
        return
    share = w.zero / max(w.d_ff, 1)
    if w.activation == "relu":
        said = f"**{w.zero} of {w.d_ff}** hidden units ({share:.0%}) are exactly 0 after ReLU"
    else:
        said = (f"the activation is **{w.activation}** ({'x·sigmoid(x)' if w.activation == 'swish' else 'x·Φ(x)'}), "
                f"smooth: nothing is exactly 0, **{w.zero} of {w.d_ff}** ({share:.0%}) are near 0 "
                f"(|h| < {w.threshold:g}) and {w.negative} are negative")
    st.markdown(f"Layer {layer + 1} of the {stack}, token **{state.md_escape(tokens[position])}**: {said}. "
                f"The FFN widens each position to d_ff = {w.d_ff}, applies the activation, and projects back to "
                f"d_model = {ckpt.config.d_model}; it sees one position at a time.")
    st.latex(r"\mathrm{FFN}(x) = " + (r"\max(0,\ xW_1 + b_1)" if w.activation == "relu"
                                      else rf"\mathrm{{{w.activation}}}(xW_1 + b_1)") + r"\,W_2 + b_2")
    downloads.chart(plots.histogram_figure({"hidden": w.hidden}, f"Hidden activations at position {position + 1}",
                                           "value after the activation"),
                    downloads.file_stem(ckpt.name, f"ffn_{stack}_L{layer + 1}_{position + 1}"),
                    key="arch_ffn")
    downloads.chart(plots.bars_figure([f"{i}: {t}" for i, t in enumerate(tokens, 1)], w.zero_per_position,
                                      "Zero hidden units at every position" if w.activation == "relu"
                                      else "Near-zero hidden units at every position", "units", highlight=position),
                    downloads.file_stem(ckpt.name, f"ffn_zeros_{stack}_L{layer + 1}"), key="arch_ffn_zero")
    st.caption(f"Capture point `{stack}.layers.{layer}.ffn.hidden`.")


def norm_view(ckpt, trace, stack: str, layer: int, position: int, tokens: list[str]) -> None:
    w = state.friendly(worked.worked_residual, ckpt.model, trace, stack, layer, position, what="The residual stream")
    if w is None:
        return
    pre = ckpt.config.norm_first
    st.markdown("Every sublayer is wrapped as **" + ("x + Sublayer(LayerNorm(x))** (pre-norm: the stream itself is "
                                                      "never normalised until the stack's final norm)"
                                                      if pre else "LayerNorm(x + Sublayer(x))** (post-norm, the "
                                                      "paper's: every layer's output is normalised)") + ".")
    downloads.chart(plots.norms_figure(w.labels, w.norms, w.mean_norms, f"{position + 1}: {tokens[position]}"),
                    downloads.file_stem(ckpt.name, f"residual_{stack}_{position + 1}"), key="arch_norms")
    ln = w.layer_norm
    st.markdown(f"**One LayerNorm** (layer {layer + 1}, {ln.where}), at token **{state.md_escape(tokens[position])}**:")
    st.latex(r"\mathrm{LN}(z) = \gamma \odot \frac{z - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")
    stats = pd.DataFrame({"vector": ["z (its input)", "(z − μ)/√(σ²+ε)", "γ ⊙ … + β (its output)"],
                          "mean": [ln.z.mean(), ln.normalized.mean(), ln.output.mean()],
                          "std": [ln.z.std(), ln.normalized.std(), ln.output.std()],
                          "norm": [np.linalg.norm(ln.z), np.linalg.norm(ln.normalized), np.linalg.norm(ln.output)]})
    st.dataframe(stats, hide_index=True, key="arch_ln_table")
    downloads.chart(plots.histogram_figure({"input z": ln.z, "normalised": ln.normalized, "output": ln.output},
                                           "LayerNorm: mean 0, std 1 per position, then gain and bias",
                                           "value"),
                    downloads.file_stem(ckpt.name, f"layernorm_{stack}_L{layer + 1}_{position + 1}"), key="arch_ln")
    where = "the captured resid_post" if ln.captured_output is not None else "the model's own LayerNorm"
    st.caption(f"μ = {ln.mean:.4f}, √(σ²+ε) = {ln.std:.4f}. Largest difference from {where}: {_diff(ln.error)}.")


def generator_view(ckpt, trace, position: int, tokens: list[str]) -> None:
    temperature = st.slider("Temperature T", 0.1, 3.0, 1.0, 0.1, key="arch_temp",
                            help="softmax(logits / T): below 1 sharpens the distribution, above 1 flattens it.")
    w = state.friendly(worked.next_tokens, trace, position, temperature, TOP_K, what="The next-token distribution")
    if w is None:
        return
    names = pieces(ckpt.tokenizer, w.ids, "tgt")
    chosen = pieces(ckpt.tokenizer, [w.chosen_id], "tgt")[0] if w.chosen_id is not None else None
    st.markdown(f"After **{state.md_escape(tokens[position])}** (decoder position {position + 1}) the decoder's last "
                f"state goes through a linear layer to {ckpt.config.tgt_vocab_size:,} logits, one per vocabulary "
                "entry, and a softmax turns them into probabilities.")
    st.latex(r"p(w) = \frac{\exp(z_w / T)}{\sum_{v} \exp(z_v / T)}")
    highlight = w.ids.index(w.chosen_id) if w.chosen_id in w.ids else None
    downloads.chart(plots.bars_figure(names, w.probs, f"Top {len(w.ids)} next tokens at T = {temperature:g}",
                                      "probability", highlight=highlight, horizontal=True),
                    downloads.file_stem(ckpt.name, f"next_tokens_{position + 1}"), key="arch_next")
    st.dataframe(pd.DataFrame({"token": names, "id": w.ids, "logit": w.logits, "logit / T": w.logits / temperature,
                               "probability": w.probs}), hide_index=True, key="arch_next_table")
    if chosen is not None:
        st.caption(f"The translation's token here is {state.md_escape(chosen)}, probability {w.chosen_prob:.4f} "
                   f"at T = {temperature:g} "
                   f"(in red when in the top {TOP_K}). Entropy of the whole distribution: {w.entropy:.3f} nats.")


def parameters_view(ckpt) -> None:
    """Parameter counts per block (they add up to the model's total) beside the paper's base and big models."""
    rows = parameters.parameter_rows(ckpt.model)
    total = ckpt.model.num_parameters()
    cfg = ckpt.config
    frame = pd.DataFrame({"block": [r.group for r in rows], "part": [r.part for r in rows],
                          "parameters": [r.count for r in rows]})
    summary = frame.groupby("block", sort=False)["parameters"].sum().reset_index()
    summary["share"] = (summary["parameters"] / max(total, 1)).map("{:.1%}".format)
    st.markdown(f"**This model: {total:,} parameters** ({parameters.tied_note(cfg)}); the sinusoidal positional "
                "encoding is computed, not stored." if cfg.positions == "sinusoidal" else
                f"**This model: {total:,} parameters** ({parameters.tied_note(cfg)}).")
    cols = st.columns([2, 3])
    cols[0].dataframe(summary, hide_index=True, key="arch_param_summary")
    cols[1].dataframe(frame, hide_index=True, key="arch_params")
    paper = []
    for name in PAPER_MODELS:
        pc = paper_config(name)
        paper.append({"model": f"paper {name}", "d_model": pc.d_model, "heads": pc.n_heads,
                      "layers": f"{pc.n_encoder_layers}+{pc.n_decoder_layers}", "d_ff": pc.d_ff,
                      "vocabulary": f"{PAPER_VOCAB:,} shared", "parameters": parameters.paper_parameter_count(name),
                      "Table 3 says": f"{PAPER_MODELS[name]['stated'] / 1e6:.0f}M"})
    vocab = (f"{cfg.src_vocab_size:,} shared" if cfg.tie_embeddings
             else f"{cfg.src_vocab_size:,} + {cfg.tgt_vocab_size:,}")
    paper.insert(0, {"model": f"this ({ckpt.name})", "d_model": cfg.d_model, "heads": cfg.n_heads,
                     "layers": f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}", "d_ff": cfg.d_ff,
                     "vocabulary": vocab, "parameters": total, "Table 3 says": ""})
    st.dataframe(pd.DataFrame(paper), hide_index=True, key="arch_paper")
    st.caption("The paper's sizes are Table 3's (Vaswani et al. 2017, base and big); the vocabulary is the paper's "
               "37,000 shared BPE tokens of its English-German setup, with embeddings and output projection tied. "
               "Counted here with the same code as this model (explorer.model.skeleton.parameter_count); the "
               "paper rounds its counts.")
