"""Gradient-based source attributions: which source words a target word's probability rests on.

For target piece k (teacher-forced on the pair), F_k(e) = log p(y_k | y_<k, source) as a function of
the source token vectors e [S, d] (the scaled embeddings before positions are added: the capture
point encoder.embed.tokens, replaced through hooks.intervene). Two methods:
* gradient x input: e * dF_k/de (captum.attr.InputXGradient);
* integrated gradients (Sundararajan et al. 2017; captum.attr.IntegratedGradients): (e - e0) times
  the gradient averaged along the straight path from a baseline e0 to e. Baseline: zero token
  vectors (positions are kept), i.e. "no word here". Completeness: the attributions sum to
  F_k(e) - F_k(e0), which the test suite checks on the shipped model.
Two paths compute them: "batched" (the default: explorer.studies.common.gradients, one forward per path point
for a group of targets and their backward passes batched; the alignment scorecard, the Alignment page
and the faithfulness scorecard all use it) and "captum" (the reference: captum's own classes, one
forward and backward per target and path point), held equal by the tests within float32 rounding of
the sums involved (tests/support/numerics.py).
A source piece's attribution is the sum over its d components (signed, so completeness reads off
directly); a source word's is the sum over its pieces and a target word's row the mean over its
pieces (attention_stats.word_matrix). As an aligner the size counts, not the sign: each target
word links to the source word of largest |attribution|.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from explorer.studies.common.gradients import (ATTRIBUTION_BYTES, ATTRIBUTIONS, IG_STEPS, TOKENS, attributions,
                                      check_method, hidden_states, row_bytes, rows_per_batch, teacher_inputs)
from explorer.studies.align.pairs import ModelPair
from explorer.inspection.attention_stats import word_matrix
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import match_threads
from explorer.runtime.modes import eval_mode

__all__ = ["ATTRIBUTIONS", "ATTRIBUTION_BYTES", "IG_STEPS", "PATHS", "TOKENS", "attribution_matrix",
           "log_prob_function", "piece_attributions", "row_bytes", "rows_per_batch"]
PATHS = ("batched", "captum")       # the fast path, and captum's classes as the reference


def log_prob_function(model, mp: ModelPair) -> tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], torch.Tensor]:
    """(F, e): F(vectors [B, S, d], positions [B]) is each row's forced piece's log-prob at its own
    target position [B]; e [1, S, d] is the pair's own token vectors.

    Only the scored position goes through the generator: the full [B, T, V] log-softmax would be the
    largest tensor of the pass, and every row reads one entry of it."""
    src, tgt_in, out = teacher_inputs(model, mp.src_ids, mp.out_ids)
    with torch.no_grad():
        tokens = model.encoder.embed.token_vectors(src).detach()              # [1, S, d]

    def forward(vectors: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:   # [B, S, d], [B] -> [B]
        hidden = hidden_states(model, src, tgt_in, vectors)                    # [B, T, d]
        rows = torch.arange(vectors.shape[0], device=hidden.device)
        log_probs = model.generator(hidden[rows, positions].unsqueeze(1))      # [B, 1, V]
        return log_probs[:, 0].gather(1, out[0, positions].unsqueeze(1)).squeeze(1)   # [B]

    return forward, tokens


def captum_attributions(model, mp: ModelPair, method: str, steps: int, wanted: Sequence[int],
                        budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference path: targets through captum in batches of rows (one row per target, and per step
    of the path for integrated gradients) sized so that a batch takes at most `budget` bytes
    (row_bytes). The rows do not interact, so batching changes the speed, not the numbers."""
    from captum.attr import InputXGradient, IntegratedGradients

    per_batch = rows_per_batch(model.cfg, len(mp.src_ids), len(mp.out_ids), budget)
    rows, deltas = [], []
    forward, tokens = log_prob_function(model, mp)
    with eval_mode(model):
        for first in range(0, len(wanted), per_batch):         # targets per batch (x steps for IG)
            part = wanted[first:first + per_batch]
            positions = torch.tensor(part, dtype=torch.long, device=tokens.device)          # [k]
            inputs = tokens.expand(len(part), -1, -1).contiguous()                         # [k, S, d]
            if method == "grad-x-input":
                attr = InputXGradient(forward).attribute(inputs.requires_grad_(),
                                                         additional_forward_args=(positions,))  # [k, S, d]
                delta = torch.zeros(len(part))
            else:
                attr, delta = IntegratedGradients(forward).attribute(
                    inputs, baselines=torch.zeros_like(inputs), additional_forward_args=(positions,),
                    n_steps=steps, internal_batch_size=per_batch,
                    return_convergence_delta=True)                                       # [k, S, d], [k]
            rows.append(attr.sum(dim=-1).detach().float().cpu())                             # [k, S]
            deltas.append(delta.detach().float().cpu())                                      # [k]
            del attr
    if not rows:
        return np.zeros((0, len(mp.src_ids)), dtype=np.float32), np.zeros(0, dtype=np.float32)
    return torch.cat(rows).numpy(), torch.cat(deltas).numpy()


def piece_attributions(model, mp: ModelPair, method: str, steps: int = IG_STEPS, with_delta: bool = False,
                       targets: Sequence[int] | None = None, budget: int = ATTRIBUTION_BYTES,
                       path: str = "batched") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attribution of each source piece to each forced piece: [T, S] (T = out_ids incl. EOS, or the
    `targets` positions only). With with_delta (integrated gradients): also captum's convergence
    delta per target [T]: sum of attributions - (F(x) - F(baseline)).

    `path`: "batched" (explorer.studies.common.gradients) or "captum" (the reference), the same numbers; both
    bounded by `budget` bytes a batch (row_bytes). A place in the compute queue is held throughout
    (runtime.compute_queue: the app's users share the cores; background analyses do not queue)."""
    check_method(method)
    if path not in PATHS:
        raise ValueError(f"attribution path must be one of {PATHS}, not {path!r}")
    wanted = list(range(len(mp.out_ids)) if targets is None else targets)
    with QUEUE.slot():
        match_threads()
        if path == "batched":
            return attributions(model, mp.src_ids, mp.out_ids, method, steps, wanted, budget, with_delta)
        matrix, deltas = captum_attributions(model, mp, method, steps, wanted, budget)
    return (matrix, deltas) if with_delta else matrix


def attribution_matrix(model, mp: ModelPair, method: str, steps: int = IG_STEPS) -> np.ndarray:
    """Word-level attributions [target words, source words] (signed)."""
    return word_matrix(piece_attributions(model, mp, method, steps), mp.tgt_groups, mp.src_groups)
