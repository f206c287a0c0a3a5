"""Gradient x input and integrated gradients for every forced token of a pair at once.

The same attributions as explorer.align.attribution.piece_attributions (the scaled source token
vectors e as input, zero baseline, captum's Gauss-Legendre points for integrated gradients, one
signed score per source piece: the sum over its d components), computed with less work. That path
runs one forward and one backward per (target, path point) row, so the forward of a path point is
repeated for every target. Here each path point is run forward once for all targets, and the
targets' backward passes go through the graph together as one batch of vector-Jacobian products
(torch.autograd.grad with is_grads_batched: a one-hot cotangent per target over all path points).
The rows do not interact, so each target's gradient is its own; batching changes the speed, not the
numbers (tests/unit/test_contributions_gradients.py holds the two paths together).

Targets go in order of position, in groups sized by the same byte bound as the reference path
(align.attribution.rows_per_batch: one row = one target at one path point); a group's forward stops
at its last target's position (later decoder inputs cannot change an earlier output).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from explorer.align.attribution import ATTRIBUTIONS, ATTRIBUTION_BYTES, TOKENS, rows_per_batch
from explorer.decoding.core import as_batch, special_ids
from explorer.inspection.hooks import intervene
from explorer.runtime.modes import eval_mode


def path_points(method: str, steps: int) -> tuple[list[float], list[float]]:
    """(alphas, weights) of the path integral: captum's Gauss-Legendre rule for integrated gradients
    (its default method), the input alone (alpha 1, weight 1) for gradient x input."""
    if method == "grad-x-input":
        return [1.0], [1.0]
    from captum.attr._utils.approximation_methods import approximation_parameters

    weights_of, alphas_of = approximation_parameters("gausslegendre")
    return alphas_of(steps), weights_of(steps)


def _forced_logprobs(model, src: torch.Tensor, tgt_in: torch.Tensor, out: torch.Tensor,
                     vectors: torch.Tensor) -> torch.Tensor:
    """log p(out[t] | source vectors, out[:t]) at every position t of tgt_in: [A, S, d] -> [A, t]."""
    a, upto = vectors.shape[0], tgt_in.shape[1]
    with intervene(model, {TOKENS: lambda _: vectors}):
        memory, src_mask = model.encode(src.expand(a, -1))                                 # [A, S, d]
        hidden = model.decode(tgt_in.expand(a, -1), memory, src_mask)                      # [A, t, d]
        log_probs = model.generator(hidden)                                                # [A, t, V]
    return log_probs.gather(2, out[:, :upto].unsqueeze(-1).expand(a, -1, -1)).squeeze(-1)  # [A, t]


def all_targets(model, src_ids: Sequence[int], out_ids: Sequence[int], method: str, steps: int = 32,
                budget: int = ATTRIBUTION_BYTES) -> np.ndarray:
    """Attribution of each source piece to each forced piece: [T, S] float32, as piece_attributions."""
    if method not in ATTRIBUTIONS:
        raise ValueError(f"attribution method must be one of {ATTRIBUTIONS}, not {method!r}")
    src, _ = as_batch([list(src_ids)], model)                                               # [1, S]
    out = torch.tensor([list(out_ids)], dtype=torch.long, device=src.device)               # [1, T]
    tgt_in = torch.cat([torch.full_like(out[:, :1], special_ids(model).start), out[:, :-1]], dim=1)  # [1, T]
    alphas, weights = path_points(method, steps)
    per_batch = rows_per_batch(model.cfg, src.shape[1], out.shape[1], budget)
    per_group = max(1, per_batch // len(alphas))                     # targets whose rows fit one batch
    per_pass = min(len(alphas), per_batch)                           # path points per forward
    embed = model.encoder.embed
    rows = []
    with eval_mode(model), torch.enable_grad():
        with torch.no_grad():
            tokens = (embed.lookup(src) * embed.scale).detach()                           # [1, S, d]
        for first in range(0, out.shape[1], per_group):
            targets = list(range(first, min(first + per_group, out.shape[1])))
            upto = targets[-1] + 1
            total = torch.zeros(len(targets), *tokens.shape[1:], dtype=tokens.dtype, device=tokens.device)  # [k, S, d]
            for start in range(0, len(alphas), per_pass):
                alpha = torch.tensor(alphas[start:start + per_pass], device=tokens.device)  # [A]
                step = torch.tensor(weights[start:start + per_pass]).float().to(tokens.device)  # [A]
                vectors = (alpha.view(-1, 1, 1) * tokens).requires_grad_()                 # [A, S, d]
                lp = _forced_logprobs(model, src, tgt_in[:, :upto], out, vectors)          # [A, t]
                picks = torch.zeros(len(targets), *lp.shape, device=lp.device)             # [k, A, t]
                picks[torch.arange(len(targets)), :, torch.tensor(targets)] = 1.0
                grads, = torch.autograd.grad(lp, vectors, picks, is_grads_batched=True)      # [k, A, S, d]
                total += (grads * step.view(1, -1, 1, 1)).sum(dim=1)                       # [k, S, d]
            rows.append((total * tokens).sum(dim=-1).detach().float().cpu())               # [k, S]
    return torch.cat(rows).numpy()                                                         # [T, S]
