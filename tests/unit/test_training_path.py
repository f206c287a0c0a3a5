"""The model's training path: Transformer.loss (logits of real targets only) and fused projections.

Both are speed changes (see `python -m benchmarks train`); these tests pin that they change no
numbers: the loss and every gradient equal the textbook computation on full logits.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from support.model_helpers import PAD, VOCAB, make_model
from support.numerics import float32_atol, product_size, scale


@pytest.fixture
def padded():
    torch.manual_seed(3)
    src = torch.randint(4, VOCAB, (3, 7))
    src[1, 4:] = PAD
    tgt = torch.randint(4, VOCAB, (3, 6))
    tgt[2, 3:] = PAD
    tgt[0, 5:] = PAD
    tgt[1, 2] = PAD                     # a padded target in mid-row: later positions still count
    return src, tgt[:, :-1], tgt[:, 1:]


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("variant", [{}, {"tie_embeddings": False}, {"norm_first": True}])
def test_loss_and_gradients_equal_cross_entropy_on_full_logits(padded, smoothing, variant):
    src, tgt_in, tgt_out = padded
    model = make_model(**variant).train()              # dropout 0 in the fixture config: deterministic
    ours = model(src, tgt_in, targets=tgt_out, label_smoothing=smoothing)
    logits = model(src, tgt_in, return_logits=True)                                   # [B, T, V]
    textbook = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD,
                               label_smoothing=smoothing, reduction="sum")
    # The two paths add in other orders (ours skips padded rows, so its products have other shapes, which
    # kernels block otherwise): float32 rounding of reductions of at most d_ff terms (d_ff > d_model, V and
    # the 15 positions), each at most the largest value in play, in any order. For gradients that is the
    # largest entry of any gradient, not of the tensor compared: the key biases' gradients are exactly 0
    # (softmax ignores a shift shared by all keys), what they hold is the rounding of sums of terms the
    # size of the other gradients. A change in the formula (a padded target counted, the smoothing spread
    # over V - 1 words instead of V) moves some gradient entry by 40 to 10,000 times this bound.
    longest = max(model.cfg.d_ff, model.cfg.d_model, VOCAB, tgt_out.numel())
    assert ours.shape == ()
    torch.testing.assert_close(ours, textbook, rtol=0, atol=float32_atol(scale(textbook), longest))
    params = [p for p in model.parameters() if p.requires_grad]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    ours_grads, textbook_grads = torch.autograd.grad(ours, params), torch.autograd.grad(textbook, params)
    atol = float32_atol(scale(*ours_grads, *textbook_grads), longest)
    for name, a, b in zip(names, ours_grads, textbook_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=atol, msg=lambda m, name=name: f"{name}: {m}")


def test_padding_targets_do_not_change_the_loss(padded):
    """Changing what sits in padded target positions' inputs leaves the loss of real targets alone."""
    src, tgt_in, tgt_out = padded
    model = make_model().train()
    before = model(src, tgt_in, targets=tgt_out)
    tgt_in2 = tgt_in.clone()
    tgt_in2[2, 4] = 7                                   # a position whose target is padding (causal: no later use)
    # the changed input only meets attention weights of exactly 0; the same shapes, but a kernel may still
    # add in another order from call to call (MKL's paths follow the data's alignment): sums of up to d_ff
    # terms, each partial sum at most the loss; a real target's loss changing moves it by > 0.1
    after = model(src, tgt_in2, targets=tgt_out)
    torch.testing.assert_close(after, before, rtol=0, atol=float32_atol(scale(before), model.cfg.d_ff))


def test_fused_projection_equals_separate_projections():
    model = make_model()
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(2, 5, model.cfg.d_model)                                          # [B, T, d]
    q, k, v = attn._fused(x, attn.w_q, attn.w_k, attn.w_v)                            # 3 x [B, H, T, dh]
    k2, v2 = attn.project_kv(x)
    for got, lin in ((q, attn.w_q), (k, attn.w_k), (v, attn.w_v), (k2, attn.w_k), (v2, attn.w_v)):
        # one product of a wider weight against three: other blockings, so other orders of d_model terms
        # (a swapped or misplaced slice differs by ~0.1, a hundred times the bound)
        atol = float32_atol(product_size(x, lin.weight, lin.bias), model.cfg.d_model)
        torch.testing.assert_close(got, attn._split(lin(x)), rtol=0, atol=atol)
    # the parameters (checkpoint names) are unchanged: w_q, w_k, w_v stay separate
    names = {n for n, _ in model.named_parameters() if "layers.0.self_attn" in n and n.startswith("encoder")}
    assert {f"encoder.layers.0.self_attn.w_{p}.{t}" for p in "qkvo" for t in ("weight", "bias")} == names


def test_loss_path_falls_back_to_full_shapes_when_the_ffn_is_captured(padded):
    """Skipping padded rows is a fast path only: a hooked FFN sees the whole [B, T, d_ff] batch."""
    from explorer.inspection.hooks import capture

    src, tgt_in, tgt_out = padded
    model = make_model()
    plain = model(src, tgt_in, targets=tgt_out)
    with torch.no_grad(), capture(model, "decoder.layers.0.ffn.hidden") as trace:
        hooked = model(src, tgt_in, targets=tgt_out)
    assert trace["decoder.layers.0.ffn.hidden"].shape == (3, 5, model.cfg.d_ff)
    # full shapes against the fast path's: other orders of sums of up to d_ff terms, each partial sum at
    # most the loss (every token's loss is positive); a padded row counted would add > 1
    torch.testing.assert_close(hooked, plain, rtol=0, atol=float32_atol(scale(plain), model.cfg.d_ff))


def test_dropout_keeps_one_minus_p_scales_and_follows_the_seed():
    from explorer.model.layers import Dropout

    drop = Dropout(0.1).train()
    x = torch.ones(200_000, requires_grad=True)
    torch.manual_seed(0)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.005          # sd of the mean: 0.0007
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())                          # gradient: the same mask and scale
    torch.manual_seed(0)
    assert torch.equal(drop(x), y)                                  # the global RNG decides (resume is exact)
    assert drop.eval()(x) is x and Dropout(0.0).train()(x) is x


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_smoothed_cross_entropy_matches_pytorch_value_and_gradient(eps):
    from explorer.model.loss import smoothed_cross_entropy

    torch.manual_seed(1)
    logits = (3 * torch.randn(20, 37)).requires_grad_()
    targets = torch.randint(0, 37, (20,))
    ours = smoothed_cross_entropy(logits, targets, eps)
    ref = F.cross_entropy(logits, targets, label_smoothing=eps, reduction="sum")
    # ours sums all 20 x 37 log-probabilities at once, PyTorch row by row: every term -log p >= 0, so every
    # partial sum is at most the loss (a row missed or counted twice moves it by > 1; a slip in how the
    # smoothing is spread shows in the gradients below, at 40 times their bound)
    torch.testing.assert_close(ours, ref, rtol=0, atol=float32_atol(scale(ref), logits.numel()))
    (g_ours,) = torch.autograd.grad(2.5 * ours, logits)
    (g_ref,) = torch.autograd.grad(2.5 * ref, logits)
    # 2.5 * (softmax - target distribution): the softmax's normaliser is a sum of 37 terms whose log is at
    # most max|logit| + log 37 (label_smoothing=eps * 37 / 36 instead of eps moves an entry by 45 times this)
    size = scale(logits) + math.log(logits.shape[1])
    torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=2.5 * float32_atol(size, logits.shape[1]))
    with pytest.raises(ValueError):
        smoothed_cross_entropy(logits, targets, 1.0)
