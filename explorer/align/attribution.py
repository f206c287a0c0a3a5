"""Gradient-based source attributions: which source words a target word's probability rests on.

For target piece k (teacher-forced on the pair), F_k(e) = log p(y_k | y_<k, source) as a function of
the source token vectors e [S, d] (the scaled embeddings before positions are added: the capture
point encoder.embed.tokens, replaced through hooks.intervene). Both methods come from captum:
* gradient x input: e * dF_k/de (captum.attr.InputXGradient);
* integrated gradients (Sundararajan et al. 2017; captum.attr.IntegratedGradients): (e - e0) times
  the gradient averaged along the straight path from a baseline e0 to e. Baseline: zero token
  vectors (positions are kept), i.e. "no word here". Completeness: the attributions sum to
  F_k(e) - F_k(e0), which the test suite checks on the shipped model.
A source piece's attribution is the sum over its d components (signed, so completeness reads off
directly); a source word's is the sum over its pieces and a target word's row the mean over its
pieces (attention_stats.word_matrix). As an aligner the size counts, not the sign: each target
word links to the source word of largest |attribution|.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from explorer.align.pairs import ModelPair
from explorer.decoding.core import as_batch, special_ids
from explorer.inspection.attention_stats import word_matrix
from explorer.inspection.hooks import intervene

ATTRIBUTIONS = ("grad-x-input", "integrated-gradients")
TOKENS = "encoder.embed.tokens"
IG_STEPS = 32                       # Gauss-Legendre points on the path (captum's default method)
IG_BATCH = 512                      # sequences per forward + backward (targets x steps are split into these)


def _teacher(model, mp: ModelPair) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src, _ = as_batch([mp.src_ids], model)                                   # [1, S]
    special = special_ids(model)
    out = torch.tensor([mp.out_ids], dtype=torch.long, device=src.device)    # [1, T]
    tgt_in = torch.cat([torch.full_like(out[:, :1], special.start), out[:, :-1]], dim=1)  # [1, T]
    return src, tgt_in, out


def log_prob_function(model, mp: ModelPair) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """(F, e): F maps source token vectors [B, S, d] to the forced pieces' log-probs [B, T];
    e [1, S, d] is the pair's own token vectors."""
    src, tgt_in, out = _teacher(model, mp)
    embed = model.encoder.embed
    with torch.no_grad():
        tokens = (embed.lookup(src) * embed.scale).detach()                   # [1, S, d]

    def forward(vectors: torch.Tensor) -> torch.Tensor:                      # [B, S, d] -> [B, T]
        b = vectors.shape[0]
        with intervene(model, {TOKENS: lambda _: vectors}):
            log_probs = model(src.expand(b, -1), tgt_in.expand(b, -1))       # [B, T, V]
        return log_probs.gather(2, out.expand(b, -1).unsqueeze(2)).squeeze(2)  # [B, T]

    return forward, tokens


def piece_attributions(model, mp: ModelPair, method: str, steps: int = IG_STEPS, with_delta: bool = False,
                       targets: Sequence[int] | None = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attribution of each source piece to each forced piece: [T, S] (T = out_ids incl. EOS, or the
    `targets` positions only). With with_delta (integrated gradients): also captum's convergence
    delta per target [T]: sum of attributions - (F(x) - F(baseline)).

    All targets go through captum as one batch: one row of inputs per target, each with its own
    `target` column. The rows do not interact, so each row's gradient is its own target's, and a
    few large products replace T small ones (several times faster on a shared CPU)."""
    from captum.attr import InputXGradient, IntegratedGradients

    if method not in ATTRIBUTIONS:
        raise ValueError(f"attribution method must be one of {ATTRIBUTIONS}, not {method!r}")
    was_training = model.training
    model.eval()
    forward, tokens = log_prob_function(model, mp)
    wanted = list(range(len(mp.out_ids)) if targets is None else targets)
    inputs = tokens.expand(len(wanted), -1, -1).contiguous()                 # [T, S, d]
    try:
        if method == "grad-x-input":
            attr, delta = InputXGradient(forward).attribute(inputs.requires_grad_(), target=wanted), None  # [T, S, d]
        else:
            attr, delta = IntegratedGradients(forward).attribute(
                inputs, baselines=torch.zeros_like(inputs), target=wanted, n_steps=steps,
                internal_batch_size=IG_BATCH, return_convergence_delta=True)             # [T, S, d], [T]
    finally:
        if was_training:
            model.train()
    matrix = attr.sum(dim=-1).detach().float().cpu().numpy()                # [T, S]
    if with_delta:
        return matrix, (delta.detach().float().cpu().numpy() if delta is not None else np.zeros(len(wanted)))
    return matrix


def attribution_matrix(model, mp: ModelPair, method: str, steps: int = IG_STEPS) -> np.ndarray:
    """Word-level attributions [target words, source words] (signed)."""
    return word_matrix(piece_attributions(model, mp, method, steps), mp.tgt_groups, mp.src_groups)
