"""Float tolerances that hold on any correct kernel, derived from the sizes and lengths of the sums.

A float32 kernel may add a reduction's terms in any order (vector width, blocking and thread count
differ between processors and builds: Intel's MKL and oneDNN paths are not AMD's), and each order
rounds differently. Each addition rounds by at most u = EPS32 / 2 of the partial sum it makes, so a sum
of n terms, in any order, is off by at most n * u * (the largest partial sum), to first order (Higham,
"Accuracy and Stability of Numerical Algorithms", 4.2); two correct results differ by at most twice
that. The bound follows the partial sums, not the result: a gradient entry that is a small sum of large
terms of opposite signs carries the large terms' rounding. So a tolerance is the partial sums' size
times the reduction's length, said where it is used, never a fixed atol that held on the processor
the test was written on.

The model's own bounds (float32_atol, scale, logit_size, depth, model_atol) live in the library,
explorer/model/rounding.py, since the app says "the same numbers" with them too; the rest is here.
  - float32_atol(size, length): two float32 results that went through sums of at most `length` terms,
    every partial sum at most `size`, differ by at most length * EPS32 * size.
  - product_size(x, weight): that size for x @ weight.T (+ bias), exactly: the largest sum of |terms|.
  - model_atol(model, *outputs): the bound for a whole model's outputs computed two ways; gradient_atol,
    score_atol, logit_difference_atol and cast_logprob_atol for gradients, sequence scores, logit
    differences and a float64 model's log-probabilities.
  - in_float64(module): where the claim is "the same computation written two ways", both ways in float64
    (rounding ~1e-16 relative) tell a real difference from rounding by many orders of magnitude.
Where the size is not known exactly (a whole network's output), the caller takes the largest value in
play and says so; the bounds stay tight enough to fail: a change in a formula moves results by far
more (each use says by how much where it matters).
"""
from __future__ import annotations

import copy

import torch

from explorer.model.rounding import EPS32, depth, float32_atol, logit_size, model_atol, product_size, scale  # noqa: F401
EPS64 = torch.finfo(torch.float64).eps          # 2**-52


def gradient_atol(model, *gradients) -> float:
    """The bound for gradients (or gradient x input attributions) of one model computed two ways (other batch
    shapes, another implementation): per layer, length x eps x the largest gradient in play, the longest
    reduction being max(d_ff, d_model, vocabulary) (the output projection's backward sums over the
    vocabulary). The largest in play, not each entry's own: an entry near 0 is a sum of terms of the
    others' size."""
    cfg = model.cfg
    longest = max(cfg.d_ff, cfg.d_model, cfg.src_vocab_size, cfg.tgt_vocab_size)
    return depth(model) * float32_atol(scale(*gradients), longest)


def logit_difference_atol(model, *values) -> float:
    """The bound for log p(a) - log p(b) of one row (a logit difference) computed two ways: the softmax
    normaliser is one number in both terms and cancels; what remains is each logit's rounding (the network's
    sums as in model_atol, with `values` standing for them, and the output projection's within logit_size,
    for a float32 model; for a float64 one only the generator's cast to float32) and the two subtractions'."""
    size = logit_size(model)
    ends = float32_atol(size, 2) + float32_atol(2 * size, 2)
    if next(model.parameters()).dtype == torch.float64:
        return ends
    return 2 * (model_atol(model, *values, vocab=False) + float32_atol(size, model.cfg.d_model)) + ends


def cast_logprob_atol(model) -> float:
    """The bound for a log-probability of a float64 model computed two ways: the generator casts the logits
    to float32 (one rounding, within logit_size) and sums the softmax normaliser over the vocabulary there."""
    return float32_atol(logit_size(model), 1) + float32_atol(1.0, model.cfg.tgt_vocab_size)


def score_atol(model, token_logprobs) -> float:
    """The bound for a decoded sequence's score (the sum of its tokens' log-probabilities, or that divided
    by a length penalty >= 1) computed two ways: each token's model_atol, added up."""
    values = list(token_logprobs)
    return max(len(values), 1) * model_atol(model, values)


def in_float64(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of a module (its own parameters; the original stays float32)."""
    return copy.deepcopy(module).double()
