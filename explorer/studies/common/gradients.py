"""Gradient x input and integrated gradients of many target pieces from one forward per path point.

For target piece k (teacher-forced), F_k(e) = log p(y_k | y_<k, source) as a function of the source
token vectors e [S, d] (the scaled embeddings before positions are added: the capture point
encoder.embed.tokens, replaced through hooks.intervene). Gradient x input is e * dF_k/de; integrated
gradients (zero baseline) are e times dF_k/de averaged over captum's Gauss-Legendre points on the
path alpha * e. A source piece's score is the sum over its d components.

captum (explorer.studies.align.attribution's reference path) runs one forward and one backward per (target,
path point) row, so each path point's forward is repeated for every target. Here a path point's
forward runs once for a group of targets, and their backward passes go through the graph together
as one batch of vector-Jacobian products (torch.autograd.grad with is_grads_batched). The generator
(the vocabulary projection, the largest product at OPUS-MT's 58k pieces) runs only at the targets'
own positions, and its gradient is taken before the batched pass, in one ordinary backward: a
target's log-prob depends on its own position's hidden state alone. The rows do not interact, so
each target's gradient is its own: batching changes the speed, not the numbers (held to captum
within float32 rounding by tests/unit/test_align_gradients.py).

Memory is bounded in bytes (`budget`, ATTRIBUTION_BYTES by default): a pass of p path points holds
the forward's saved tensors of p rows (row_bytes, the bound of captum's rows too) and, as its backward
goes one operation at a time, a few gradients of p x k rows for k targets (target_bytes); batch_shape
picks k and p to fit. A group's forward stops at its last target's position (later decoder inputs
cannot change an earlier output).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from explorer.decoding.core import as_batch, special_ids
from explorer.inspection.hooks import intervene
from explorer.runtime.modes import eval_mode

ATTRIBUTIONS = ("grad-x-input", "integrated-gradients")
TOKENS = "encoder.embed.tokens"
IG_STEPS = 32                       # Gauss-Legendre points on the path (captum's default method)
# The memory one batch of rows (one row: one target piece at one step of the path) may take with its
# backward pass. Rows per batch follow from row_bytes, so a 160-word pair costs what a short one does,
# in more batches (one batch of every target at once grew with the square of the pair's length: a
# 161-piece pair took 5.4 GB).
ATTRIBUTION_BYTES = 192 << 20


def row_bytes(cfg, src_len: int, tgt_len: int) -> int:
    """An upper estimate of what one row of a batch holds through forward and backward (float32): per
    layer and position the sublayers' inputs and outputs, the FFN's hidden layer and their gradients;
    per head the attention maps (scores, weights and the weights' gradient); the generator at the
    one position scored. Checked against measured peaks in tests/unit/test_attribution_memory.py."""
    d, f, h = cfg.d_model, cfg.d_ff, cfg.n_heads
    s, t = src_len, tgt_len
    encoder = cfg.n_encoder_layers * (s * (8 * d + 2 * f) + 2 * h * s * s)
    decoder = cfg.n_decoder_layers * (t * (12 * d + 2 * f) + 2 * h * (t * t + t * s))
    return 4 * (encoder + decoder + 4 * cfg.tgt_vocab_size + 4 * s * d)


def rows_per_batch(cfg, src_len: int, tgt_len: int, budget: int = ATTRIBUTION_BYTES) -> int:
    return max(1, budget // row_bytes(cfg, src_len, tgt_len))


def target_bytes(cfg, src_len: int, tgt_len: int) -> int:
    """An upper estimate of what one more target adds to one path point's batched backward pass
    (float32): the batched pass goes back one operation at a time, so per target it holds the gradients
    of about one layer (an encoder's and a decoder's together, as in row_bytes: the gradient at the
    encoder's output gathers over every decoder layer), its cotangent at the decoder's output, its
    gradient at the token vectors and the generator's at its one position; the forward's saved
    tensors are the path point's own (row_bytes), shared by every target. Measured peaks: 0.6 to 0.9 of
    the budget (small at 48 MB with 58 and 127 source pieces, small and base at 192 MB with 25 and 41);
    tests/unit/test_attribution_memory.py checks four users at once."""
    d, f, h = cfg.d_model, cfg.d_ff, cfg.n_heads
    s, t = src_len, tgt_len
    layers = s * (8 * d + 2 * f) + 2 * h * s * s + t * (12 * d + 2 * f) + 2 * h * (t * t + t * s)
    return 4 * (layers + 2 * t * d + 2 * s * d + 4 * cfg.tgt_vocab_size)


def batch_shape(cfg, src_len: int, tgt_len: int, targets: int, points: int,
                budget: int = ATTRIBUTION_BYTES) -> tuple[int, int]:
    """(targets per group, path points per pass) within `budget` bytes: a pass of p points and k
    targets takes p x (row_bytes + k x target_bytes). The forward of every point is repeated once per
    group, the backward is one per target and point whatever the grouping, so the targets come first
    (as many as fit with one point a pass), then as many points as fit beside them."""
    row, each = row_bytes(cfg, src_len, tgt_len), target_bytes(cfg, src_len, tgt_len)
    group = max(1, min(targets, (budget - row) // each))
    return group, max(1, min(points, budget // (row + group * each)))


def check_method(method: str) -> None:
    if method not in ATTRIBUTIONS:
        raise ValueError(f"attribution method must be one of {ATTRIBUTIONS}, not {method!r}")


def teacher_inputs(model, src_ids: Sequence[int], out_ids: Sequence[int]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source [1, S], decoder inputs [1, T]: start + out[:-1], forced pieces [1, T])."""
    src, _ = as_batch([list(src_ids)], model)                                            # [1, S]
    out = torch.tensor([list(out_ids)], dtype=torch.long, device=src.device)             # [1, T]
    tgt_in = torch.cat([torch.full_like(out[:, :1], special_ids(model).start), out[:, :-1]], dim=1)  # [1, T]
    return src, tgt_in, out


def path_points(method: str, steps: int) -> tuple[list[float], list[float]]:
    """(alphas, weights) of the path integral: captum's Gauss-Legendre rule for integrated gradients
    (its default method), the input alone (alpha 1, weight 1) for gradient x input."""
    check_method(method)
    if method == "grad-x-input":
        return [1.0], [1.0]
    from captum.attr._utils.approximation_methods import approximation_parameters

    weights_of, alphas_of = approximation_parameters("gausslegendre")
    return alphas_of(steps), weights_of(steps)


def hidden_states(model, src: torch.Tensor, tgt_in: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """The decoder's last hidden states with `vectors` as the source token vectors: [A, S, d] -> [A, t, d]."""
    a = vectors.shape[0]
    with intervene(model, {TOKENS: lambda _: vectors}):
        memory, src_mask = model.encode(src.expand(a, -1))                                  # [A, S, d]
        return model.decode(tgt_in.expand(a, -1), memory, src_mask)                         # [A, t, d]


def forced_log_probs(model, hidden_at: torch.Tensor, pieces: torch.Tensor) -> torch.Tensor:
    """log p(pieces[j]) from the hidden state at target j's own position: [A, k, d], [k] -> [A, k]."""
    log_probs = model.generator(hidden_at)                                                  # [A, k, V]
    return log_probs.gather(2, pieces.view(1, -1, 1).expand(hidden_at.shape[0], -1, 1)).squeeze(-1)  # [A, k]


def _group_gradient(model, src, tgt_in, out, tokens, positions, alphas, weights, per_pass) -> torch.Tensor:
    """Sum over path points of weight x dF_j/de at alpha * e, for the targets at `positions`: [k, S, d]."""
    k, upto = len(positions), int(positions.max()) + 1
    total = torch.zeros(k, *tokens.shape[1:], dtype=tokens.dtype, device=tokens.device)    # [k, S, d]
    for start in range(0, len(alphas), per_pass):
        alpha = torch.tensor(alphas[start:start + per_pass], dtype=tokens.dtype, device=tokens.device)  # [A]
        step = torch.tensor(weights[start:start + per_pass]).float().to(tokens.device)     # [A]
        vectors = (alpha.view(-1, 1, 1) * tokens).requires_grad_()                          # [A, S, d]
        hidden = hidden_states(model, src, tgt_in[:, :upto], vectors)                       # [A, t, d]
        at = hidden[:, positions].detach().requires_grad_()                                 # [A, k, d]
        seed, = torch.autograd.grad(forced_log_probs(model, at, out[0, positions]).sum(), at)  # [A, k, d]
        cotangent = hidden.new_zeros(k, *hidden.shape)                                      # [k, A, t, d]
        cotangent[torch.arange(k), :, positions] = seed.transpose(0, 1).to(hidden.dtype)    # [k, A, d]
        grads, = torch.autograd.grad(hidden, vectors, cotangent, is_grads_batched=True)     # [k, A, S, d]
        total += (grads * step.view(1, -1, 1, 1).to(grads.dtype)).sum(dim=1)                # [k, S, d]
        del hidden, cotangent, grads                     # before the next pass allocates its own
    return total


def attributions(model, src_ids: Sequence[int], out_ids: Sequence[int], method: str, steps: int = IG_STEPS,
                 targets: Sequence[int] | None = None, budget: int = ATTRIBUTION_BYTES, with_delta: bool = False
                 ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attribution of each source piece to each forced piece [T, S] float32 (T: out_ids incl. EOS, or
    the `targets` positions only). With with_delta also the convergence delta per target [T]: the sum
    of its attributions - (F(e) - F(0)), as captum's return_convergence_delta (zeros for gradient x
    input); it costs one more forward of two rows per group of targets."""
    alphas, weights = path_points(method, steps)
    src, tgt_in, out = teacher_inputs(model, src_ids, out_ids)
    wanted = list(range(out.shape[1])) if targets is None else [int(t) for t in targets]
    if any(not 0 <= t < out.shape[1] for t in wanted):
        raise ValueError(f"target positions must be in 0..{out.shape[1] - 1}, not {wanted}")
    per_group, per_pass = batch_shape(model.cfg, src.shape[1], out.shape[1], len(wanted), len(alphas), budget)
    rows, deltas = [], []
    with eval_mode(model), torch.enable_grad():
        with torch.no_grad():
            tokens = model.encoder.embed.token_vectors(src).detach()                     # [1, S, d]
        for first in range(0, len(wanted), per_group):
            positions = torch.tensor(wanted[first:first + per_group], device=tokens.device)  # [k]
            total = _group_gradient(model, src, tgt_in, out, tokens, positions, alphas, weights, per_pass)
            scores = (total * tokens).sum(dim=-1).detach().float()                          # [k, S]
            rows.append(scores.cpu())
            if not with_delta or method == "grad-x-input":
                deltas.append(torch.zeros(len(positions)))
                continue
            with torch.no_grad():
                ends = torch.cat([tokens, torch.zeros_like(tokens)])                         # [2, S, d]: e, baseline
                upto = int(positions.max()) + 1
                hidden = hidden_states(model, src, tgt_in[:, :upto], ends)                   # [2, t, d]
                lp = forced_log_probs(model, hidden[:, positions], out[0, positions]).float()  # [2, k]
            deltas.append((scores.sum(dim=1) - (lp[0] - lp[1])).cpu())                       # [k]
    matrix = torch.cat(rows).numpy() if rows else np.zeros((0, len(src_ids)), dtype=np.float32)   # [T, S]
    if with_delta:
        return matrix, (torch.cat(deltas).numpy() if deltas else np.zeros(0, dtype=np.float32))
    return matrix
