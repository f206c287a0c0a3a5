"""The int8 decoding path: each int8 product within int8 rounding's bound of the float one, decoding on it
consistent with its log-probs, the float model untouched, bad input refused in one line.

The tolerance (explorer/model/rounding.py's int8_atol) is derived from the scheme, not from a kernel:
weights rounded per output row to max |row| / 127, the input to one scale (max(x, 0) - min(x, 0)) / 255
with a rounded zero point, integer sums exact; so any correct int8 kernel of that scheme lands within it,
and one that uses the wrong rows or weights does not (checked below). Being a worst case it can hide a small
dropped bias, which a zero input (exact in int8) checks on its own.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from explorer.config import DecodeConfig
from explorer.decoding import beam_search, greedy_search
from explorer.model import int8
from explorer.model.int8 import Int8Model, Int8Unavailable, is_int8, quantize
from explorer.model.rounding import int8_atol
from support import decoding_helpers
from support.decoding_helpers import random_model
from support.model_helpers import EOS, VOCAB, make_model

pytestmark = pytest.mark.skipif(int8.engine() is None, reason="this torch has no int8 engine")


def _sources() -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    src = torch.randint(4, VOCAB, (3, 9), generator=gen)                          # [B, S]
    src[:, -1] = EOS
    src[1, 6:] = 0                                                                # padding in one row
    src[1, 5] = EOS
    return src


def _recording(monkeypatch) -> list[float]:
    """Replace int8_product by one that checks every call against the float product of the same input:
    records |int8 - float| / int8_atol per call (a value above 1 is a product outside the bound)."""
    ratios, real = [], int8.int8_product

    def checked(*linears):
        inner = real(*linears)
        weight = torch.cat([m.weight.detach() for m in linears])                  # [out, in]
        bias = None if linears[0].bias is None else torch.cat([m.bias.detach() for m in linears])

        def product(x):
            got = inner(x)                                                        # [..., out]
            exact = F.linear(x.double(), weight.double(), None if bias is None else bias.double())
            ratios.append(float((got.double() - exact).abs().max())
                          / int8_atol(x, weight, bias, reduced=int8.reduce_range()))
            return got
        return product
    monkeypatch.setattr(int8, "int8_product", checked)
    return ratios


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "activation": "swish", "final_logits_bias": True},
                                       {"tie_embeddings": False, "tie_output": False}])
def test_every_int8_product_is_within_int8_rounding_of_the_float_product(monkeypatch, overrides):
    model = make_model(**overrides)
    if model.generator.proj.bias is not None:
        with torch.no_grad():
            model.generator.proj.bias.copy_(torch.linspace(-3.0, 3.0, VOCAB))
    ratios = _recording(monkeypatch)
    quantized = quantize(model)
    src = _sources()
    tgt = torch.cat([torch.full((3, 1), model.cfg.decoder_start_id), src[:, :6].clamp_min(4)], 1)  # [B, T]
    logits = quantized(src, tgt, return_logits=True)                              # [B, T, V]
    beam_search(quantized, src[:1], DecodeConfig(beam_size=3, max_len_b=8))
    products = 4 * model.cfg.n_encoder_layers + 5 * model.cfg.n_decoder_layers + 1
    assert len(ratios) >= products and max(ratios) <= 1.0, max(ratios)
    # the logits themselves: the generator's int8 product of the int8 decoder's hidden states
    memory, mask = quantized.encode(src)
    hidden = quantized.decode(tgt, memory, mask)                                  # [B, T, d]
    proj = model.generator.proj
    exact = F.linear(hidden.double(), proj.weight.detach().double(),
                     None if proj.bias is None else proj.bias.detach().double())
    assert float((logits.double() - exact).abs().max()) <= int8_atol(hidden, proj.weight, proj.bias,
                                                                     reduced=int8.reduce_range())
    # and the bound is tight enough to tell int8 rounding from a wrong product: dropping the bias,
    # or the float model's own logits on a fresh model's weights, are far outside it
    other = make_model(seed=99, **overrides)
    wrong = F.linear(hidden.double(), other.generator.proj.weight.detach().double())
    assert float((logits.double() - wrong).abs().max()) > 10 * int8_atol(hidden, proj.weight, proj.bias)


def test_int8_logits_follow_the_float_models():
    """End to end, int8 rounding compounds through the layers: no per-product bound holds for the whole
    stack, so this asserts what it must not break, the ranking of a clear winner: wherever the float
    model's top logit leads by more than the int8 model's largest deviation from it, ... twice over,
    the two models agree on the top token."""
    model = make_model()
    quantized = quantize(model)
    src = _sources()
    tgt = torch.cat([torch.full((3, 1), model.cfg.decoder_start_id), src[:, :6].clamp_min(4)], 1)  # [B, T]
    with torch.no_grad():
        ours = quantized(src, tgt)                                                # [B, T, V]
        theirs = model(src, tgt)                                                  # [B, T, V]
    deviation = float((ours - theirs).abs().max())
    scale = float(theirs.abs().max())
    assert 0 < deviation < 0.1 * scale                                            # int8, not float32; close
    top2 = theirs.topk(2, dim=-1).values                                          # [B, T, 2]
    clear = (top2[..., 0] - top2[..., 1]) > 2 * deviation                         # [B, T]
    assert torch.equal(ours.argmax(-1)[clear], theirs.argmax(-1)[clear])


def test_greedy_outputs_equal_where_the_margin_allows():
    """On a confident model (the reverse task) every step whose float top-2 gap exceeds twice the int8
    model's largest log-prob deviation must pick the same token; the share of equal outputs is stated."""
    from support.decoding_helpers import toy_pairs

    trained = decoding_helpers._trained_once()                                   # the shared reverse-task model
    quantized = quantize(trained)
    sources = [src + [3] for src, _ in toy_pairs(24, torch.Generator().manual_seed(11))]
    cfg = DecodeConfig(strategy="greedy", max_len_b=12)
    same = 0
    for ids in sources:
        src = torch.tensor([ids])                                                 # [1, S]
        want = greedy_search(trained, src, cfg)[0].hypotheses[0].ids
        got = greedy_search(quantized, src, cfg)[0].hypotheses[0].ids
        tgt = torch.tensor([[trained.cfg.decoder_start_id] + want])               # [1, T+1]
        with torch.no_grad():
            theirs, ours = trained(src, tgt[:, :-1]), quantized(src, tgt[:, :-1])   # [1, T, V]
        deviation = float((ours - theirs).abs().max())
        top2 = theirs[0].topk(2, dim=-1).values                                   # [T, 2]
        if bool(((top2[:, 0] - top2[:, 1]) > 2 * deviation).all()):
            assert got == want, (ids, got, want)
        same += got == want
    # 23 of 24 here (VNNI: 8-bit inputs); 19 of 24 with 7-bit inputs (fbgemm on a CPU without VNNI, forced here)
    assert same >= 16, f"{same}/24 greedy outputs equal"


def test_beam_search_with_its_trace_runs_on_the_int8_model():
    quantized = quantize(make_model())
    result = beam_search(quantized, _sources()[:1], DecodeConfig(beam_size=4, n_best=2, max_len_b=10), trace=True)
    assert len(result[0].hypotheses) == 2 and result[0].trace is not None and is_int8(quantized)


def test_the_float_model_is_untouched():
    model = make_model(final_logits_bias=True)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    modules = [(name, type(m), id(m)) for name, m in model.named_modules()]
    pointers = [p.data_ptr() for p in model.parameters()]
    quantized = quantize(model)
    quantized(_sources(), torch.full((3, 2), model.cfg.decoder_start_id))
    assert not is_int8(model) and isinstance(quantized, Int8Model) and quantized is not model
    assert [(name, type(m), id(m)) for name, m in model.named_modules()] == modules
    assert [p.data_ptr() for p in model.parameters()] == pointers
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("bad, message", [(torch.nn.Linear(3, 3), "needs one of this project's models"),
                                          ("float64", "float32 only")])
def test_bad_models_are_refused_in_one_line(bad, message):
    if bad == "float64":
        bad = random_model().double()
    with pytest.raises(Int8Unavailable) as err:
        quantize(bad)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_head_ablation_on_the_int8_model_is_refused_in_one_line():
    quantized = quantize(make_model())
    with pytest.raises(ValueError) as err:
        beam_search(quantized, _sources()[:1], DecodeConfig(beam_size=2, max_len_b=4), ablate=[("cross", 0, 0)])
    assert "float model only" in str(err.value) and "\n" not in str(err.value)


def test_a_translation_on_the_int8_model_says_so_and_the_float_ones_do_not():
    from explorer.decoding import translate
    from support.decoding_helpers import StandInTokenizer

    model = random_model()
    quantized = quantize(model)
    for cfg in (DecodeConfig(beam_size=3, max_len_b=5), DecodeConfig(strategy="greedy", max_len_b=5)):
        ours = translate(quantized, StandInTokenizer(), "a b c", cfg, trace=True)
        theirs = translate(model, StandInTokenizer(), "a b c", cfg)
        assert ours.meta["int8"] == quantized.kernel and "int8" not in theirs.meta


def test_an_int8_product_of_zeros_is_its_bias():
    """The bound above is a worst case (every rounding aligned), wide enough to hide a small dropped bias:
    a zero input, which int8 represents exactly, leaves the bias alone to check, on every linear layer."""
    model = make_model(final_logits_bias=True)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.bias is not None]
    assert len(linears) >= 4 * model.cfg.n_encoder_layers
    for linear in linears:
        got = int8.int8_product(linear)(torch.zeros(2, linear.in_features))                # [2, out]
        bias = linear.bias.detach()
        assert torch.allclose(got, bias.expand_as(got), rtol=0, atol=1e-6 * (float(bias.abs().max()) + 1))
