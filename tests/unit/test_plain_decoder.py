"""The module-free decoding path equals the module path, and is used only when nothing is watching."""
from __future__ import annotations

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import beam_search
from explorer.decoding.core import StepDecoder
from explorer.inspection.hooks import ablate_heads, capture
from explorer.model import plain_decoder
from explorer.model.plain_decoder import PlainDecoder, _product, plain_decoder_for
from support.model_helpers import EOS, VOCAB, make_model
from support.numerics import float32_atol, model_atol, product_size, score_atol

# The plain path computes the module path's formulas with other kernels (oneDNN's packed products, fused
# projections), so other orders of the same sums: compared within support.numerics' bounds, which a wrong
# cache, mask or slice exceeds by far.

VARIANTS = [{}, {"norm_first": True}, {"positions": "learned"}, {"tie_embeddings": False},
            {"activation": "swish"}, {"activation": "gelu"}, {"pe_layout": "halves"}, {"scale_embeddings": False},
            {"final_logits_bias": True}, {"tie_output": False}, {"tie_embeddings": False, "tie_output": True},
            {"activation": "swish", "pe_layout": "halves", "final_logits_bias": True, "norm_first": True},
            {"norm_first": True, "pe_layout": "halves", "pe_frequencies": "fairseq", "pe_offset": 2}]   # M2M100's


def _model(**overrides):
    """make_model, with a logits bias (zero when made) set to something that shows."""
    model = make_model(**overrides)
    if model.generator.proj.bias is not None:
        with torch.no_grad():
            model.generator.proj.bias.copy_(torch.linspace(-3.0, 3.0, VOCAB))
    return model


def _sources() -> torch.Tensor:
    torch.manual_seed(7)
    src = torch.randint(4, VOCAB, (3, 9))                                     # [B, S]
    src[:, -1] = EOS
    src[1, 6:] = 0                                                            # padding in one row
    src[1, 5] = EOS
    return src


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "paper")
def test_plain_steps_equal_module_steps(overrides):
    model = _model(**overrides)
    src = _sources()
    steps = torch.randint(4, VOCAB, (3, 6))                                   # [B, T] fed one by one
    plain = PlainDecoder(model)
    with torch.inference_mode():
        memory, mask = model.encode(src)
        module_cache, plain_cache = model.new_cache(), model.new_cache()
        whole = plain.generator(plain.decode(steps, memory, mask))            # uncached, all at once
        for t in range(steps.shape[1]):
            token = steps[:, t:t + 1]                                         # [B, 1]
            expected = model.generator(model.decode(token, memory, mask, module_cache))   # [B, 1, V]
            got = plain.generator(plain.decode(token, memory, mask, plain_cache))
            torch.testing.assert_close(got, expected, atol=model_atol(model, expected), rtol=0)
            torch.testing.assert_close(whole[:, t:t + 1], expected, atol=model_atol(model, expected), rtol=0)
    assert plain_cache.length == module_cache.length == steps.shape[1]
    for mine, theirs in zip(plain_cache.layers, module_cache.layers):
        for kind, part in (("self", "k"), ("cross", "v")):
            atol = model_atol(model, theirs[kind][part], vocab=False)
            torch.testing.assert_close(mine[kind][part], theirs[kind][part], atol=atol, rtol=0)


def test_plain_path_only_when_unwatched():
    model = make_model()
    assert isinstance(plain_decoder_for(model), PlainDecoder)
    with capture(model, "decoder.layers.0.cross_attn.weights"):
        assert plain_decoder_for(model) is None
    with ablate_heads(model, [("cross", 0, 0)]):
        assert plain_decoder_for(model) is None
    with ablate_heads(model, [("encoder", 0, 0)]):                            # the decoder is untouched
        assert plain_decoder_for(model) is not None
    model.train()
    assert plain_decoder_for(model) is None
    model.eval()
    assert plain_decoder_for(model) is not None


def test_plain_decoder_is_reused_and_rebuilt_when_weights_change():
    model = make_model()
    first = plain_decoder_for(model)
    assert plain_decoder_for(model) is first
    src = _sources()
    with torch.inference_mode():
        memory, mask = model.encode(src)
        tgt = torch.full((3, 1), 2)
        before = model.generator(model.decode(tgt, memory, mask))
    with torch.no_grad():
        model.decoder.layers[0].ffn.w_1.weight.mul_(2.0)                      # in place, as an optimizer step
    second = plain_decoder_for(model)
    assert second is not first
    with torch.inference_mode():
        expected = model.generator(model.decode(tgt, memory, mask))
        assert not torch.allclose(before, expected, atol=1e-3)                # the change matters
        for rows in (1, 3):
            got = second.generator(second.decode(tgt[:rows], memory[:rows], mask[:rows]))
            torch.testing.assert_close(got, expected[:rows], atol=model_atol(model, expected), rtol=0)


def test_beam_search_same_with_and_without_the_plain_path():
    model = make_model()
    src = _sources()
    cfg = DecodeConfig(beam_size=3, n_best=3, max_len_b=12, length_penalty="gnmt")
    plain = beam_search(model, src, cfg)
    with capture(model, "decoder.layers.0.self_attn.context"):               # a hook: module path
        with torch.inference_mode():
            memory, mask = model.encode(src)
        assert StepDecoder(model, memory, mask).plain is None
        watched = beam_search(model, src, cfg)
    for a, b in zip(plain, watched):
        assert [h.ids for h in a.hypotheses] == [h.ids for h in b.hypotheses]
        for ha, hb in zip(a.hypotheses, b.hypotheses):
            assert ha.score == pytest.approx(hb.score, abs=score_atol(model, ha.token_logprobs))


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "input-major"])
@pytest.mark.parametrize("bias", [True, False])
def test_products_equal_linear_for_every_row_count(bias, packed, monkeypatch):
    """Both forms of a product (oneDNN's packed weight where it works, else an input-major copy)
    compute the projection, fused or not, whatever the row count; a row's result is its own."""
    monkeypatch.setattr(plain_decoder, "USE_PACKED", packed)
    torch.manual_seed(3)
    linears = [torch.nn.Linear(16, 24, bias=bias), torch.nn.Linear(16, 24, bias=bias)]
    with torch.no_grad():
        single, fused = _product(linears[0]), _product(*linears)
        for rows in (1, 2, 5, 8, 25):
            x = torch.randn(rows, 1, 16)                                      # [N, 1, in], as a decoding step
            size = max(product_size(x, m.weight, m.bias) for m in linears)  # sums of 16 terms, any order
            torch.testing.assert_close(single(x), linears[0](x), atol=float32_atol(size, 16), rtol=0)
            torch.testing.assert_close(fused(x), torch.cat([m(x) for m in linears], dim=-1),
                                       atol=float32_atol(size, 16), rtol=0)
            assert single(x).is_contiguous() and fused(x).shape == (rows, 1, 48)


def test_beam_search_same_with_either_product_form(monkeypatch):
    model = make_model()
    src = _sources()
    cfg = DecodeConfig(beam_size=3, n_best=3, max_len_b=12, length_penalty="gnmt")
    monkeypatch.setattr(plain_decoder, "USE_PACKED", False)
    expected = beam_search(model, src, cfg)
    monkeypatch.setattr(plain_decoder, "USE_PACKED", True)
    with torch.no_grad():
        model.generator.proj.weight.add_(0.0)                                 # a new version: rebuilt, packed
    for got, want in zip(beam_search(model, src, cfg), expected):
        assert [h.ids for h in got.hypotheses] == [h.ids for h in want.hypotheses]
        for g, w in zip(got.hypotheses, want.hypotheses):
            assert g.score == pytest.approx(w.score, abs=score_atol(model, w.token_logprobs))


def test_checking_for_packed_products_draws_no_random_numbers():
    """The once-per-process check runs at the first decode, before sampling draws its tokens."""
    plain_decoder._packing_available.cache_clear()
    state = torch.get_rng_state()
    plain_decoder._packing_available()
    assert torch.equal(torch.get_rng_state(), state)
