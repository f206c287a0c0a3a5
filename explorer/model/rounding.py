"""How far two correct float32 evaluations of one model may differ: the bound that tells float rounding
from a real difference, on any processor's kernels.

A float32 kernel may add a reduction's terms in any order (vector width, blocking and thread count differ
between processors and builds), and each order rounds differently. Each addition rounds by at most
EPS32 / 2 of the partial sum it makes, so a sum of n terms, in any order, is off by at most n * EPS32 / 2 *
(the largest partial sum), to first order (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2);
two correct results differ by at most twice that. The Training vs inference page says "the same numbers"
within model_atol (the cached step decoder and the one-pass forward add in other orders); the test suite's
tolerances (tests/support/numerics.py) are built on the same functions.
"""
from __future__ import annotations

import math

import torch

EPS32 = torch.finfo(torch.float32).eps          # 2**-23: float32's spacing at 1.0


def float32_atol(size: float, length: int, eps: float = EPS32) -> float:
    """The most two correct float32 results can differ by after sums of at most `length` terms whose
    partial sums stay within `size`, added in any order: length * eps * size (first order)."""
    return float(length) * eps * float(size)


def scale(*tensors) -> float:
    """The largest finite magnitude among the tensors (or arrays, or numbers); masked attention scores
    hold -inf, which comparisons match by position, not by size."""
    sizes = [torch.as_tensor(t).detach().abs() for t in tensors]
    return max((float(s[torch.isfinite(s)].max()) for s in sizes if torch.isfinite(s).any()), default=0.0)


def product_size(x, weight, bias=None) -> float:
    """The largest sum of |terms| among the entries of x @ weight.T (+ bias): it bounds every partial sum
    of every entry, whatever order a kernel adds in."""
    x, weight = torch.as_tensor(x).detach().double(), torch.as_tensor(weight).detach().double()
    total = x.abs() @ weight.abs().T
    if bias is not None:
        total = total + torch.as_tensor(bias).detach().double().abs()
    return float(total.max())


def logit_size(model) -> float:
    """A bound on every logit's sum of |terms|, from the weights alone: the decoder's output is a LayerNorm's
    (its norm at most sqrt(d) * max|gain| + |bias|), so by Cauchy-Schwarz a logit's terms add up to at most
    that times the longest row of the output projection, plus the logits' bias."""
    norms = [m for m in model.decoder.modules() if isinstance(m, torch.nn.LayerNorm)]
    hidden = max(math.sqrt(m.normalized_shape[-1]) * float(m.weight.detach().abs().max())
                 + float(m.bias.detach().norm()) for m in norms)
    proj = model.generator.proj
    bias = 0.0 if proj.bias is None else float(proj.bias.detach().abs().max())
    return hidden * float(proj.weight.detach().norm(dim=1).max()) + bias


def depth(model) -> int:
    """The layers a value passes through: each adds its sums' rounding (first-order bounds add up)."""
    return model.cfg.n_encoder_layers + model.cfg.n_decoder_layers


def model_atol(model, *outputs, vocab: bool = True) -> float:
    """The bound for two float32 evaluations of one model that add in other orders (other shapes, a fused or
    a step-by-step path, another kernel): in each layer, sums of at most max(d_ff, d_model) terms, with the
    outputs' largest value (at least 1: the activations between LayerNorms are of order 1) standing for
    every partial sum's.
    Log-probabilities (`vocab`) add two: the output projection's sums of d_model terms within logit_size
    (a log-probability near 0 comes from logits that are not), and the softmax normaliser's sum over the
    vocabulary, whose relative rounding is an absolute one in log space. First order, and an estimate where
    the partial sums are not known exactly; on the test models the differences seen sit 30 to 1000 times
    below it, and a wrong mask, scale or slice moves results by 1e-2 or more."""
    cfg = model.cfg
    bound = depth(model) * float32_atol(max(scale(*outputs), 1.0), max(cfg.d_ff, cfg.d_model))
    if vocab:
        bound += float32_atol(logit_size(model), cfg.d_model)
        bound += float32_atol(1.0, max(cfg.src_vocab_size, cfg.tgt_vocab_size))
    return bound


def int8_atol(x, weight, bias=None, reduced: bool = False) -> float:
    """The most an int8 product of x [N, in] by weight [out, in] (+ bias) can be off from the float one,
    on any correct kernel of explorer/model/int8.py's scheme: weights rounded per output row to
    s_w = max |row| / 127 (error <= s_w / 2 each), the input to one scale s_x = (max(x, 0) - min(x, 0)) / 255
    (/ 127 with `reduced` range) with a rounded zero point (error <= s_x each, the shifted range's clipping
    included), integer sums exact. So x.w - x^.w^ = x.e_w + e_x.w - e_x.e_w, whose size is at most
    sum |x_i| s_w / 2 + s_x sum |w_i| + in * s_x * s_w, plus float32's rounding of the result. The largest
    over the output's entries; the bound is int8 rounding's, about 1e4 times float32's."""
    x, weight = torch.as_tensor(x).detach().double(), torch.as_tensor(weight).detach().double()
    x = x.reshape(-1, x.shape[-1])                                                   # [N, in]
    s_w = weight.abs().amax(dim=1) / 127.0                                           # [out]
    s_x = float(x.max().clamp_min(0) - x.min().clamp_max(0)) / (127.0 if reduced else 255.0)
    bound = (x.abs().sum(1, keepdim=True) * s_w / 2 + s_x * weight.abs().sum(1)
             + weight.shape[1] * s_x * s_w)                                          # [N, out]
    return float(bound.max()) + float32_atol(product_size(x, weight, bias), weight.shape[1])
