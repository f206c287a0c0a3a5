"""The instrumented Transformer: capture-point shapes, fast path == explicit path, masking,
causality, positional encodings, incremental decoding, and that it learns at all."""
from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.inspection.hooks import capture, capture_points
from explorer.model import functional, layers, sinusoidal_table
from explorer.model.plain_decoder import PlainDecoder
from support.model_helpers import BOS, PAD, VOCAB, make_model
from support.numerics import float32_atol, model_atol, product_size

VARIANTS = {
    "post-norm": {},
    "pre-norm": {"norm_first": True},
    "learned": {"positions": "learned"},
    "untied": {"tie_embeddings": False},
    "marian-like": {"activation": "swish", "pe_layout": "halves", "final_logits_bias": True, "tie_output": False},
}


def expected_shapes(cfg, B, S, T) -> dict[str, tuple]:
    """Every capture name DESIGN.md promises, with its shape."""
    H, d, dh, ff = cfg.n_heads, cfg.d_model, cfg.d_head, cfg.d_ff
    out = {"generator.logits": (B, T, cfg.tgt_vocab_size)}
    for stack, L, n in (("encoder", S, cfg.n_encoder_layers), ("decoder", T, cfg.n_decoder_layers)):
        for q in ("tokens", "positions", "out"):
            out[f"{stack}.embed.{q}"] = (B, L, d)
        for i in range(n):
            p = f"{stack}.layers.{i}"
            out[f"{p}.resid_post"] = (B, L, d)
            out[f"{p}.ffn.hidden"] = (B, L, ff)
            out[f"{p}.ffn.out"] = (B, L, d)
            blocks = [("self_attn", L)] + ([("cross_attn", S)] if stack == "decoder" else [])
            for block, K in blocks:
                out[f"{p}.{block}.scores"] = (B, H, L, K)
                out[f"{p}.{block}.weights"] = (B, H, L, K)
                out[f"{p}.{block}.context"] = (B, H, L, dh)
                out[f"{p}.{block}.out"] = (B, L, d)
    return out


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_capture_point_exists_with_its_shape(variant, batch):
    model = make_model(**VARIANTS[variant])
    src, tgt = batch
    want = expected_shapes(model.cfg, src.shape[0], src.shape[1], tgt.shape[1])
    assert sorted(capture_points(model)) == sorted(want)
    with torch.no_grad(), capture(model, "*") as trace:
        model(src, tgt)
    assert {n: trace[n].shape for n in trace.names()} == want
    # the three attention kinds, named explicitly: [B,H,S,S], [B,H,T,T], [B,H,T,S]
    assert trace.attention("encoder", 1).shape == (2, 4, 6, 6)
    assert trace.attention("decoder", 1).shape == (2, 4, 5, 5)
    assert trace.attention("cross", 1).shape == (2, 4, 5, 6)


def _count_sdpa(monkeypatch) -> list[int]:
    calls = [0]
    real = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(layers.F, "scaled_dot_product_attention", counting)
    return calls


@pytest.mark.parametrize("variant", ["post-norm", "pre-norm"])
def test_logits_same_with_and_without_capture(variant, batch, monkeypatch):
    model = make_model(**VARIANTS[variant])
    src, tgt = batch
    n_attn = model.cfg.n_encoder_layers + 2 * model.cfg.n_decoder_layers
    calls = _count_sdpa(monkeypatch)
    with torch.no_grad():
        fast = model.logits(src, tgt)                                         # [B, T, V]
        assert calls[0] == n_attn                     # nothing hooked: every attention on the fast path
        with capture(model, "*") as trace:
            explicit = model.logits(src, tgt)
        assert calls[0] == n_attn                     # hooked: no fused call at all
        with capture(model, "generator.logits"):
            model.logits(src, tgt)
        assert calls[0] == 2 * n_attn                 # only scores/weights hooks force the explicit path
    assert fast.dtype == torch.float32
    assert "encoder.layers.0.self_attn.scores" in trace.arrays
    atol = model_atol(model, fast, vocab=False)          # the fused attention kernel against the explicit one
    torch.testing.assert_close(explicit, fast, rtol=0, atol=atol)
    np.testing.assert_allclose(trace["generator.logits"], fast.numpy(), rtol=0, atol=atol)


def test_attention_rows_sum_to_one_and_padding_gets_zero_weight(model, batch):
    src, tgt = batch
    with torch.no_grad(), capture(model, "*.weights") as trace:
        model(src, tgt)
    for name in trace.names():        # rows of <= 6 weights, each within a few eps of exact: < 1e-6 in any order
        np.testing.assert_allclose(trace[name].sum(-1), 1.0, rtol=0, atol=1e-5, err_msg=name)
    pad_keys = (src == PAD).numpy()                                           # [B, S]
    for i in range(model.cfg.n_encoder_layers):
        w = trace.attention("encoder", i)                                     # [B, H, S, S]
        assert np.all(w[1][..., pad_keys[1]] == 0.0)
        assert np.all(w[0] > 0)                                               # no pad: nothing masked
    for i in range(model.cfg.n_decoder_layers):
        assert np.all(trace.attention("cross", i)[1][..., pad_keys[1]] == 0.0)
        causal = trace.attention("decoder", i)                                # [B, H, T, T]
        assert np.all(np.triu(np.ones((5, 5), bool), k=1) <= (causal == 0.0))


@pytest.mark.parametrize("fast", [True, False])
def test_decoder_is_causal(model, batch, fast):
    src, tgt = batch
    with torch.no_grad():
        for j in range(1, tgt.shape[1]):
            changed = tgt.clone()
            changed[:, j] = (changed[:, j] + 7) % (VOCAB - 3) + 3
            if fast:
                a, b = model(src, tgt), model(src, changed)                   # [B, T, V]
            else:
                with capture(model, "*.scores"):
                    a, b = model(src, tgt), model(src, changed)
            # same shapes; a leak from position j would move earlier rows by > 1e-2, far past the bound
            torch.testing.assert_close(a[:, :j], b[:, :j], rtol=0, atol=model_atol(model, a, vocab=False))
            assert (a[:, j] - b[:, j]).abs().max() > 1e-2, f"position {j} ignores its own input"


@pytest.mark.parametrize("base", [10000.0, 1000.0])
def test_sinusoidal_table_matches_the_formula(base):
    d = 16
    table = sinusoidal_table(50, d, base).double()                            # [50, 16]
    for pos in (0, 1, 7, 42):
        for i in (0, 1, 3, 7):                                                # pairs (2i, 2i+1)
            angle = pos / base ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    # hand-computed: pos 1, dims 2/3 -> angle 1 / base^(2/16)
    assert table[1, 2].item() == pytest.approx(math.sin(base ** -0.125), abs=1e-6)
    assert table[0, 1].item() == 1.0 and table[0, 0].item() == 0.0


def test_bases_differ_and_model_uses_its_base():
    assert not torch.allclose(sinusoidal_table(20, 8, 10000.0), sinusoidal_table(20, 8, 1000.0))
    model = make_model(pe_base=1000.0)
    torch.testing.assert_close(model.encoder.embed.pe, sinusoidal_table(32, 128, 1000.0), rtol=0, atol=0)
    odd = sinusoidal_table(5, 7)                                              # odd width still fills every dim
    assert odd.shape == (5, 7) and odd[3, 6].item() == pytest.approx(math.sin(3 / 10000 ** (6 / 7)), abs=1e-6)


def test_embeddings_are_scaled_and_tied(model, batch):
    src, _ = batch
    lookup = model.encoder.embed.lookup
    assert lookup is model.decoder.embed.lookup
    assert model.generator.proj.weight is lookup.weight
    assert abs(lookup.weight.std().item() - model.cfg.d_model ** -0.5) < 0.01   # N(0, d^-0.5) init
    with torch.no_grad(), capture(model, "encoder.embed.tokens") as trace:
        model.encode(src)
        expected = lookup(src) * math.sqrt(128)                               # [B, S, d]
    np.testing.assert_allclose(trace["encoder.embed.tokens"], expected.numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", ["post-norm", "pre-norm"])
def test_incremental_decoding_matches_full_decode(variant, batch):
    model = make_model(**VARIANTS[variant])
    src, tgt = batch
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        full = model.generator(model.decode(tgt, memory, src_mask))          # [B, T, V]
        cache = model.new_cache()
        steps = [model.generator(model.decode(tgt[:, t:t + 1], memory, src_mask, cache))
                 for t in range(tgt.shape[1])]                                # T x [B, 1, V]
    # one position at a time against all at once: other shapes, so other orders of the same sums
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=model_atol(model, full, vocab=False))


def test_tiny_model_overfits_a_few_sentence_pairs():
    torch.manual_seed(0)
    model = make_model(seed=0, n_encoder_layers=1, n_decoder_layers=1).train()
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(3, VOCAB, (6, 7), generator=gen)                      # [N, S]
    tgt = torch.randint(3, VOCAB, (6, 6), generator=gen)                      # [N, T]
    src[3:, 5:] = PAD                                                         # some padded pairs
    tgt_in = torch.cat([torch.full((6, 1), BOS), tgt[:, :-1]], dim=1)         # [N, T]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(60):
        logits = model.logits(src, tgt_in)                                    # [N, T, V]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    assert losses[-1] <= 0.1 * losses[0], losses[::10]                       # typically ~0.001x


def _module_and_plain(model, src, tgt) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [B, T, V] of the same targets from the module path and from a fresh plain path."""
    with torch.inference_mode():
        memory, mask = model.encode(src)
        modules = model.generator(model.decode(tgt, memory, mask))
        plain = PlainDecoder(model)
        return modules, plain.generator(plain.decode(tgt, memory, mask))


def test_both_paths_run_the_functional_core(batch, monkeypatch):
    """The decoder's formulas exist once: the modules and PlainDecoder make the same calls into
    model/functional.py, so neither can keep an arithmetic of its own."""
    calls = collections.Counter()
    for name in ("embed", "attend", "append_kv", "memory_kv", "residual", "feed_forward", "decoder_layer",
                 "decoder_stack", "log_probs"):
        real = getattr(functional, name)
        monkeypatch.setattr(functional, name, lambda *a, _real=real, _name=name, **k: calls.update([_name]) or _real(*a, **k))
    model = make_model()
    src, tgt = batch
    with torch.inference_mode():
        memory, mask = model.encode(src)
        calls.clear()
        model.generator(model.decode(tgt, memory, mask, model.new_cache()))
        by_modules = dict(calls)
        calls.clear()
        plain = PlainDecoder(model)                                           # built after the patch
        plain.generator(plain.decode(tgt, memory, mask, model.new_cache()))
    n = model.cfg.n_decoder_layers
    assert by_modules == dict(calls) == {"embed": 1, "attend": 2 * n, "append_kv": n, "memory_kv": n,
                                         "residual": 3 * n, "feed_forward": n, "decoder_layer": n,
                                         "decoder_stack": 1, "log_probs": 1}


def test_a_model_option_reaches_the_plain_path_unasked(batch, monkeypatch):
    """Options read from the modules (an FFN activation, the embedding scale, a logits bias) change
    the plain path's log-probs exactly as the module path's."""
    with pytest.raises(ValueError, match="activation must be one of gelu, relu, swish"):
        layers.FeedForward(8, 16, 0.0, activation="tanh")
    model = make_model()
    src, tgt = batch
    before, _ = _module_and_plain(model, src, tgt)
    for layer in model.decoder.layers:
        layer.ffn.activation = "gelu"
    model.decoder.embed.scale = 1.0
    model.generator.proj.bias = torch.nn.Parameter(torch.linspace(-2.0, 2.0, VOCAB))
    modules, plain = _module_and_plain(model, src, tgt)
    assert (modules - before).abs().max() > 1e-2
    torch.testing.assert_close(plain, modules, rtol=0, atol=model_atol(model, modules))   # other kernels (oneDNN)


def test_decoding_watched_asks_the_model():
    """Any forward hook on the decoder or generator (a capture point or not) means the module path;
    the encoder's hooks do not (it runs once, through its modules, either way); so does training."""
    model = make_model()
    assert not model.decoding_watched()
    for module in (model.decoder.layers[0].ffn.w_1, model.generator.logits, model.decoder.norm):
        handle = module.register_forward_pre_hook(lambda *args: None)
        assert model.decoding_watched()
        handle.remove()
    handle = model.encoder.layers[0].self_attn.weights.register_forward_hook(lambda *args: None)
    assert not model.decoding_watched()
    handle.remove()
    model.train()
    assert model.decoding_watched()


# ----------------------------------------------------------------- model options (ModelConfig)

@pytest.mark.parametrize("d", [16, 7])
def test_halves_layout_is_sines_then_cosines_of_the_same_frequencies(d):
    interleaved = sinusoidal_table(30, d, 1000.0).double()                   # [30, d]
    halves = sinusoidal_table(30, d, 1000.0, "halves").double()
    sines, cosines = interleaved[:, 0::2], interleaved[:, 1::2]               # [30, ceil(d/2)], [30, floor(d/2)]
    torch.testing.assert_close(halves, torch.cat([sines, cosines], dim=1), rtol=0, atol=0)
    w = functional.sinusoid_frequencies(d, 1000.0)                            # [ceil(d/2)]
    torch.testing.assert_close(halves[5, : (d + 1) // 2], torch.sin(5 * w), rtol=0, atol=1e-6)
    assert halves[3, (d + 1) // 2].item() == pytest.approx(math.cos(3.0), abs=1e-6)   # cos of frequency 1
    model = make_model(pe_layout="halves")
    torch.testing.assert_close(model.decoder.embed.pe, sinusoidal_table(32, 128, 10000.0, "halves"), rtol=0, atol=0)
    with pytest.raises(ValueError, match="pe_layout must be one of interleaved, halves"):
        sinusoidal_table(4, 8, layout="split")


def test_activations_are_their_formulas():
    x = torch.linspace(-4.0, 4.0, 101, dtype=torch.float64)
    acts = functional.ACTIVATIONS
    torch.testing.assert_close(acts["relu"](x), x.clamp(min=0), rtol=0, atol=0)
    torch.testing.assert_close(acts["swish"](x), x * torch.sigmoid(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(acts["gelu"](x), x * 0.5 * (1 + torch.erf(x / math.sqrt(2))), rtol=0, atol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "swish", "gelu"])
def test_the_model_uses_its_activation(activation, batch):
    model = make_model(activation=activation)
    src, _ = batch
    ffn = model.encoder.layers[0].ffn
    seen = {}
    handle = ffn.register_forward_hook(lambda module, args, out: seen.setdefault("x", args[0]))
    try:
        with torch.no_grad(), capture(model, "encoder.layers.0.ffn.hidden") as trace:
            model.encode(src)
    finally:
        handle.remove()
    with torch.no_grad():
        expected = functional.ACTIVATIONS[activation](ffn.w_1(seen["x"]))     # [B, S, d_ff]
    # the same product, maybe in another order (activations differ from each other by > 0.1)
    atol = float32_atol(product_size(seen["x"], ffn.w_1.weight, ffn.w_1.bias), model.cfg.d_model)
    np.testing.assert_allclose(trace["encoder.layers.0.ffn.hidden"], expected.numpy(), rtol=0, atol=atol)


def test_unscaled_embeddings_are_the_lookup_rows(batch):
    model = make_model(scale_embeddings=False)
    src, _ = batch
    assert model.encoder.embed.scale == model.decoder.embed.scale == 1.0
    with torch.no_grad(), capture(model, "encoder.embed.tokens") as trace:
        model.encode(src)
        expected = model.encoder.embed.lookup(src)                            # [B, S, d], not times sqrt(d)
    np.testing.assert_allclose(trace["encoder.embed.tokens"], expected.numpy(), rtol=0, atol=0)


def test_final_logits_bias_shifts_the_logits(batch):
    src, tgt = batch
    assert "generator.proj.bias" not in make_model().state_dict()
    model = make_model(final_logits_bias=True)
    bias = model.generator.proj.bias
    assert "generator.proj.bias" in model.state_dict() and bias.shape == (VOCAB,)
    assert not bias.any()                                                     # made zero: no effect until trained
    with torch.no_grad():
        before = model(src, tgt, return_logits=True)                          # [B, T, V]
        bias.copy_(torch.linspace(-2.0, 2.0, VOCAB))
        after = model(src, tgt, return_logits=True)
        # a product with its bias added against one without: other kernels, so other orders
        torch.testing.assert_close(after - before, bias.expand_as(after), rtol=0,
                                   atol=model_atol(model, before, after, vocab=False))
        loss = model(src, tgt[:, 1:].clone(), targets=tgt[:, 1:].clone(), label_smoothing=0.0)
        expected = F.cross_entropy(model(src, tgt[:, 1:].clone(), return_logits=True).flatten(0, 1),
                                   tgt[:, 1:].flatten(), ignore_index=PAD, reduction="sum")
    # the training path adds it too; its loss skips padded rows (other shapes): every token's loss is
    # positive, so the total bounds every partial sum; a missing bias moves the loss by > 1
    torch.testing.assert_close(loss, expected, rtol=0, atol=model_atol(model, expected))


@pytest.mark.parametrize("tie_embeddings, tie_output, own", [
    (True, None, set()), (True, True, set()), (True, False, {"generator.proj.weight"}),
    (False, None, {"decoder.embed.lookup.weight", "generator.proj.weight"}),
    (False, False, {"decoder.embed.lookup.weight", "generator.proj.weight"}),
    (False, True, {"decoder.embed.lookup.weight"}),
])
def test_three_way_tying(tie_embeddings, tie_output, own):
    """tie_embeddings: one source/target embedding; tie_output: the projection is the target
    embedding (None: as tie_embeddings, what configs written before tie_output meant)."""
    model = make_model(tie_embeddings=tie_embeddings, tie_output=tie_output)
    names = {name for name, _ in model.named_parameters()}
    matrices = {"encoder.embed.lookup.weight", "decoder.embed.lookup.weight", "generator.proj.weight"}
    assert names & matrices == {"encoder.embed.lookup.weight"} | own
    assert (model.generator.proj.weight is model.decoder.embed.lookup.weight) == model.cfg.output_tied
    assert (model.encoder.embed.lookup is model.decoder.embed.lookup) == tie_embeddings
    for name in names & matrices:                                             # every embedding N(0, d^-0.5)
        assert abs(model.get_parameter(name).std().item() - 128 ** -0.5) < 0.01


def test_model_options_are_checked_with_clear_messages():
    from explorer.config import ModelConfig

    for bad, message in [({"activation": "tanh"}, "activation must be one of relu, swish, gelu"),
                         ({"pe_layout": "split"}, "pe_layout must be one of interleaved, halves"),
                         ({"scale_embeddings": "yes"}, "scale_embeddings must be true or false"),
                         ({"final_logits_bias": 1}, "final_logits_bias must be true or false"),
                         ({"tie_output": "no"}, "tie_output must be true, false or null"),
                         ({"eos_id": 8000}, r"eos_id must be an integer id of both vocabularies \(0 to 7999\)"),
                         ({"unk_id": -1}, "unk_id must be an integer id"),
                         ({"decoder_start_id": 9000, "tgt_vocab_size": 9000, "tie_embeddings": False},
                          "decoder_start_id must be an integer id of the target vocabulary"),
                         ({"eos_id": 0}, "eos_id .* must differ from pad_id"),
                         ({"unk_id": 0}, "unk_id and pad_id must differ")]:
        with pytest.raises(ValueError, match=message):
            ModelConfig(**bad)
    marian = ModelConfig(eos_id=0, unk_id=1, pad_id=7999, decoder_start_id=7999)   # Marian's ids
    assert marian.decoder_start_id == marian.pad_id


def test_configs_written_before_the_options_keep_their_meaning():
    from explorer.config import ModelConfig

    old = {"src_vocab_size": 40, "tgt_vocab_size": 40, "d_model": 16, "n_heads": 2, "d_ff": 32,
           "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": 0.0, "max_len": 8, "pe_base": 10000.0,
           "positions": "sinusoidal", "norm_first": False, "tie_embeddings": False, "pad_id": 0}
    cfg = ModelConfig.from_dict(old)
    assert (cfg.activation, cfg.pe_layout, cfg.scale_embeddings, cfg.final_logits_bias) == ("relu", "interleaved",
                                                                                             True, False)
    assert cfg.output_tied is False and ModelConfig.from_dict({**old, "tie_embeddings": True}).output_tied
    assert (cfg.pad_id, cfg.unk_id, cfg.decoder_start_id, cfg.eos_id) == (PAD, 1, BOS, 3)
