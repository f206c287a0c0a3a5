"""explorer.inspection.worked: the Architecture page's worked numbers equal what the model computed.

Q, K and V are not capture points: worked.py recomputes them from the layer's own weights and the
sublayer's rebuilt input. These tests hold every worked number to the captured tensor of the same
forward (1e-5): q.k / sqrt(d_k) from the shown Q and K = `scores`, softmax = `weights`, the weighted
sum of V = `context`, Concat(heads) W^O + b = `out`, the rebuilt stream = `resid_post`, the
embedding sum = `embed.out`. On the paper's model and on one with Marian's options (swish, halves,
unscaled embeddings, a logits bias) made pre-norm; parameter counts add up to num_parameters().
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.config import ModelConfig, paper_config
from explorer.decoding import attention_trace
from explorer.inspection import parameters, worked, worked_attention
from explorer.inspection.trace import KINDS, attention_kind
from explorer.model import Transformer
from explorer.model.skeleton import parameter_count
from explorer.plots import architecture as plots
from explorer.store.card import PAPER_BASE
from support.model_helpers import EOS, VOCAB, make_model, tiny_config
from support.numerics import EPS32, float32_atol, model_atol, scale



def tolerance(model, trace) -> float:
    """The model's float32 values against the worked examples' float64 recomputation from captured tensors:
    model_atol (support.numerics) with the largest captured value standing for every partial sum's. A wrong
    head, key or layer in a worked example is off by > 1e-2."""
    return model_atol(model, *trace.arrays.values(), vocab=False)
MARIAN = dict(activation="swish", pe_layout="halves", scale_embeddings=False, final_logits_bias=True,
              norm_first=True)
MODELS = {"paper": {}, "marian_prenorm": MARIAN}


@pytest.fixture(scope="module", params=list(MODELS))
def traced(request):
    """(model, trace) of one teacher-forced forward over a 7-token source and a 6-token output."""
    model = make_model(**MODELS[request.param])
    if model.generator.proj.bias is not None:
        with torch.no_grad():
            model.generator.proj.bias.normal_(0.0, 0.5)
    rng = np.random.default_rng(0)
    src = [int(i) for i in rng.integers(4, VOCAB, 6)] + [EOS]
    tgt = [int(i) for i in rng.integers(4, VOCAB, 5)] + [EOS]
    return model, attention_trace(model, None, src, tgt)


def test_the_options_are_the_ones_meant(traced):
    model, _ = traced
    cfg = model.cfg
    assert (cfg.activation, cfg.pe_layout, cfg.scale_embeddings, cfg.norm_first) in (
        ("relu", "interleaved", True, False), ("swish", "halves", False, True))


@pytest.mark.parametrize("kind", KINDS)
def test_worked_attention_equals_the_captured_tensors(traced, kind):
    model, trace = traced
    atol = tolerance(model, trace)
    d_k = model.cfg.d_head
    for layer in range(attention_kind(kind).n_layers(model.cfg)):
        scores = trace.attention(kind, layer, "scores")[0]                    # [H, q, k]
        weights = trace.attention(kind, layer, "weights")[0]                  # [H, q, k]
        context = trace[attention_kind(kind).capture_name(layer, "context")][0]   # [H, q, dh]
        for head in range(model.cfg.n_heads):
            for query in range(scores.shape[1]):
                w = worked_attention.worked_attention(model, trace, kind, layer, head, query)
                assert w.d_k == d_k and w.sqrt_d_k == math.sqrt(d_k)
                recomputed = (w.k @ w.q) / math.sqrt(d_k)                     # from the shown Q and K
                open_ = ~w.masked
                assert np.allclose(recomputed[open_], scores[head, query][open_], atol=atol, rtol=0)
                assert np.all(np.isneginf(scores[head, query][w.masked]))     # masked keys: -inf in the model too
                assert np.allclose(w.scores[open_], recomputed[open_], atol=1e-12)
                assert np.allclose(w.weights, weights[head, query], atol=atol, rtol=0)
                assert np.allclose(w.weights @ w.v, context[head, query], atol=atol, rtol=0)
                assert np.allclose(w.context, context[head, query], atol=atol, rtol=0)
                assert max(w.errors.values()) < atol
                assert w.weights.sum() == pytest.approx(1.0, abs=1e-12) and np.all(w.weights[w.masked] == 0)


def test_the_decoder_masks_later_keys_only(traced):
    model, trace = traced
    w = worked_attention.worked_attention(model, trace, "decoder", 0, 0, 2)
    assert w.masked.tolist() == [j > 2 for j in range(len(w.key_tokens))]
    assert not worked_attention.worked_attention(model, trace, "cross", 0, 0, 2).masked.any()


@pytest.mark.parametrize("kind", KINDS)
def test_heads_concatenated_and_projected_by_w_o_equal_out(traced, kind):
    model, trace = traced
    atol = tolerance(model, trace)
    for layer in range(attention_kind(kind).n_layers(model.cfg)):
        out = trace[attention_kind(kind).capture_name(layer, "out")][0]       # [q, d]
        for query in range(out.shape[0]):
            h = worked_attention.heads_output(model, trace, kind, layer, query)
            assert np.allclose(h.projected, out[query], atol=atol, rtol=0) and h.error < atol
            assert np.allclose(h.contributions.sum(0) + h.bias, out[query], atol=atol, rtol=0)
            assert h.concat.shape == (model.cfg.d_model,) and h.head_norms.shape == (model.cfg.n_heads,)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_rebuilt_stream_equals_resid_post(traced, stack):
    """The sublayer inputs Q, K, V are computed from are those of the forward: rebuilt layer by
    layer from captured tensors, each layer's output equals its captured resid_post."""
    model, trace = traced
    atol = tolerance(model, trace)
    for layer in range(len(getattr(model, stack).layers)):
        stream = worked.layer_stream(model, trace, stack, layer)
        assert np.allclose(stream.after.cpu().numpy(), trace[f"{stack}.layers.{layer}.resid_post"][0], atol=atol,
                           rtol=0)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_embedding_sum_equals_embed_out(traced, stack):
    model, trace = traced
    atol = tolerance(model, trace)
    n = trace[f"{stack}.embed.out"].shape[1]
    for position in range(n):
        w = worked.worked_embedding(model, trace, stack, position)
        assert w.scale == (math.sqrt(model.cfg.d_model) if model.cfg.scale_embeddings else 1.0)
        assert np.allclose(w.scaled, trace[f"{stack}.embed.tokens"][0, position], atol=atol, rtol=0)
        assert np.allclose(w.total, trace[f"{stack}.embed.out"][0, position], atol=atol, rtol=0) and w.error < atol
        # a norm: a sum of d_model squares, all positive, so within d_model eps of itself in any order
        assert w.norms["total"] == pytest.approx(float(np.linalg.norm(trace[f"{stack}.embed.out"][0, position])),
                                                 rel=model.cfg.d_model * EPS32)
    ids = trace.meta["src_ids"] if stack == "encoder" else trace.meta["tgt_in_ids"]
    assert worked.worked_embedding(model, trace, stack, 0).token_id == ids[0]


def test_ffn_zero_counts(traced):
    model, trace = traced
    hidden = trace["decoder.layers.1.ffn.hidden"][0]                          # [T, d_ff]
    w = worked.worked_ffn(trace, model.cfg, "decoder", 1, 3)
    assert w.d_ff == model.cfg.d_ff and w.activation == model.cfg.activation
    if model.cfg.activation == "relu":
        assert np.all(hidden >= 0) and w.threshold == 0 and w.negative == 0
        assert w.zero == int((hidden[3] == 0).sum()) > 0
        assert w.zero_per_position.tolist() == (hidden == 0).sum(1).tolist()
    else:
        assert w.threshold == worked.NEAR_ZERO and w.negative == int((hidden[3] < 0).sum()) > 0
        assert w.zero == int((np.abs(hidden[3]) < worked.NEAR_ZERO).sum())


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_residual_norms_and_layer_norm(traced, stack):
    model, trace = traced
    atol = tolerance(model, trace)
    n_layers = len(getattr(model, stack).layers)
    r = worked.worked_residual(model, trace, stack, n_layers - 1, 1)
    expected = [np.linalg.norm(trace[f"{stack}.embed.out"][0, 1])] + [
        np.linalg.norm(trace[f"{stack}.layers.{i}.resid_post"][0, 1]) for i in range(n_layers)]
    assert np.allclose(r.norms[:n_layers + 1], expected, rtol=model.cfg.d_model * EPS32, atol=0)   # as above
    assert len(r.labels) == n_layers + 1 + (1 if model.cfg.norm_first else 0)
    ln = r.layer_norm
    assert abs(ln.normalized.mean()) < 1e-6 and ln.normalized.std() == pytest.approx(1.0, abs=1e-3)
    assert np.allclose(ln.output, ln.module_output, atol=atol, rtol=0) and ln.error < atol
    if model.cfg.norm_first:
        assert ln.captured_output is None
    else:                                                                     # post-norm: the layer's output
        assert np.allclose(ln.output, trace[f"{stack}.layers.{n_layers - 1}.resid_post"][0, 1], atol=atol, rtol=0)


def test_next_tokens_at_a_temperature(traced):
    model, trace = traced
    logits = torch.from_numpy(trace["generator.logits"][0, 2]).double()       # [V]
    for t in (0.5, 1.0, 2.0):
        n = worked.next_tokens(trace, 2, t, 5)
        expected = torch.softmax(logits / t, dim=-1)
        assert n.ids == torch.topk(expected, 5).indices.tolist()
        # the model's float32 log-softmax against float64: the normaliser's sum of V terms within the
        # largest logit / T (a probability is at most 1, so its error is at most its log's)
        atol = float32_atol(scale(logits / t) + 1.0, VOCAB + 1)
        assert np.allclose(n.probs, expected[n.ids].numpy(), atol=atol, rtol=0)
        assert n.chosen_id == trace.meta["tgt_ids"][2]
        assert n.chosen_prob == pytest.approx(float(expected[n.chosen_id]), abs=atol)
    assert worked.next_tokens(trace, 2, 0.5).entropy < worked.next_tokens(trace, 2, 2.0).entropy
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            worked.next_tokens(trace, 2, bad)


def test_bad_indices_raise_value_errors(traced):
    model, trace = traced
    with pytest.raises(ValueError):
        worked_attention.worked_attention(model, trace, "cross", 0, model.cfg.n_heads, 0)
    with pytest.raises(ValueError):
        worked_attention.worked_attention(model, trace, "encoder", 5, 0, 0)
    with pytest.raises(ValueError):
        worked.worked_embedding(model, trace, "encoder", 99)
    with pytest.raises(ValueError):
        worked.worked_ffn(trace, model.cfg, "encoder", 0, -1)


PARAMETER_CONFIGS = {
    "tied": {}, "marian_prenorm": MARIAN,
    "untied": dict(tie_embeddings=False, tie_output=False, src_vocab_size=50),
    "output_tied_only": dict(tie_embeddings=False, tie_output=True, src_vocab_size=50),
    "learned_positions": dict(positions="learned", tie_output=False),
}


@pytest.mark.parametrize("name", list(PARAMETER_CONFIGS))
def test_parameter_counts_add_up(name):
    torch.manual_seed(0)
    model = Transformer(tiny_config(**PARAMETER_CONFIGS[name]))
    rows = parameters.parameter_rows(model)
    assert sum(r.count for r in rows) == model.num_parameters() == parameter_count(model.cfg)
    names = [n for r in rows for n in r.names]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters()) and len(names) == len(set(names))
    assert {r.block for r in rows} <= set(plots.BLOCKS)
    groups = {r.group for r in rows}
    assert {"Embeddings", "Encoder layer 1", "Decoder layer 2"} <= groups
    assert ("Generator" in groups) == (not model.cfg.output_tied or model.cfg.final_logits_bias)
    cross = [r for r in rows if r.part == "cross-attention"]
    assert len(cross) == model.cfg.n_decoder_layers and all(r.block == "cross_attn" for r in cross)


def test_the_papers_models():
    base, big = paper_config("base"), paper_config("big")
    assert {k: getattr(base, k) for k in PAPER_BASE} == PAPER_BASE
    assert (big.d_model, big.n_heads, big.d_ff, big.n_encoder_layers) == (1024, 16, 4096, 6)
    assert base.src_vocab_size == big.tgt_vocab_size == 37_000 and base.output_tied
    # Table 3 says 65M and 213M; with its sizes and a 37k shared vocabulary the exact counts are near
    assert parameters.paper_parameter_count("base") == parameter_count(base) == 63_082_496
    assert parameters.paper_parameter_count("big") == parameter_count(big) == 214_245_376
    assert isinstance(base, ModelConfig)


def box_heights(fig, text: str) -> list[float]:
    """The heights of the diagram's boxes labelled `text`, bottom to top."""
    return sorted(a.y for a in fig.layout.annotations if a.text.replace("<b>", "").replace("</b>", "") == text)


def test_a_pre_norm_model_is_drawn_with_its_norms_before_the_sublayers():
    """Post-norm (the paper): each Add & Norm above the sublayer it follows. Pre-norm (M2M100, NLLB): each
    LayerNorm below the sublayer it feeds, a final one per stack, and the encoder's output entering the
    cross-attention box wherever it is."""
    post = plots.architecture_figure(None, 2, 2, "relu", False)
    pre = plots.architecture_figure(None, 2, 2, "relu", True)
    attention = box_heights(post, "Multi-Head Attention")                     # encoder's, then cross
    assert all(any(0 < n - a < 1.2 for n in box_heights(post, "Add & Norm")) for a in attention)
    assert all(any(0 < a - n < 1.2 for n in box_heights(pre, "LayerNorm")) for a in box_heights(pre, "Multi-Head Attention"))
    assert not box_heights(post, "LayerNorm") and not box_heights(pre, "Add & Norm")
    assert "final LayerNorm" in " ".join(a.text for a in pre.layout.annotations)
    assert "final LayerNorm" not in " ".join(a.text for a in post.layout.annotations)
    hover = " ".join(pre.data[0].text)                                        # the blocks' names say it too
    assert "Encoder LayerNorm (before each sublayer" in hover and "add & norm" not in hover
    assert "Encoder add & norm" in " ".join(post.data[0].text)
    for fig in (post, pre):
        cross = max(box_heights(fig, "Multi-Head Attention"))
        arrows = [a for a in fig.layout.annotations if a.showarrow and a.ay == a.y and a.y == cross]
        assert len(arrows) == 1, "the encoder's output does not enter the cross-attention"


def test_the_diagram_holds_every_block_and_a_click_names_it():
    fig = plots.architecture_figure("cross_attn", 3, 2, "swish", True, {"enc_ffn": "123 parameters"})
    keys = list(fig.data[0].customdata)
    assert set(keys) == set(plots.BLOCKS)
    red = [s for s in fig.layout.shapes if s.line.color == plots.SELECTED]
    assert len(red) == 1
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "3×" in texts and "2×" in texts and "Feed Forward (swish)" in texts and "final LayerNorm" in texts
    assert any("123 parameters" in t for t in fig.data[0].text)
    event = {"selection": {"points": [{"customdata": "generator", "x": 1, "y": 2}]}}
    assert plots.selected_block(event) == "generator"
    assert plots.selected_block({"selection": {"points": [{"customdata": ["dec_ffn"]}]}}) == "dec_ffn"
    for junk in (None, {}, {"selection": {"points": []}}, {"selection": {"points": [{"customdata": "nope"}]}}, 3):
        assert plots.selected_block(junk) is None
