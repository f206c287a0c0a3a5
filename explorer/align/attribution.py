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
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import match_threads
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


def _teacher(model, mp: ModelPair) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src, _ = as_batch([mp.src_ids], model)                                   # [1, S]
    special = special_ids(model)
    out = torch.tensor([mp.out_ids], dtype=torch.long, device=src.device)    # [1, T]
    tgt_in = torch.cat([torch.full_like(out[:, :1], special.start), out[:, :-1]], dim=1)  # [1, T]
    return src, tgt_in, out


def log_prob_function(model, mp: ModelPair) -> tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], torch.Tensor]:
    """(F, e): F(vectors [B, S, d], positions [B]) is each row's forced piece's log-prob at its own
    target position [B]; e [1, S, d] is the pair's own token vectors.

    Only the scored position goes through the generator: the full [B, T, V] log-softmax would be the
    largest tensor of the pass, and every row reads one entry of it."""
    src, tgt_in, out = _teacher(model, mp)
    embed = model.encoder.embed
    with torch.no_grad():
        tokens = (embed.lookup(src) * embed.scale).detach()                   # [1, S, d]

    def forward(vectors: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:   # [B, S, d], [B] -> [B]
        b = vectors.shape[0]
        with intervene(model, {TOKENS: lambda _: vectors}):
            memory, src_mask = model.encode(src.expand(b, -1))             # [B, S, d]
            hidden = model.decode(tgt_in.expand(b, -1), memory, src_mask)     # [B, T, d]
            rows = torch.arange(b, device=hidden.device)
            log_probs = model.generator(hidden[rows, positions].unsqueeze(1))  # [B, 1, V]
        return log_probs[:, 0].gather(1, out[0, positions].unsqueeze(1)).squeeze(1)   # [B]

    return forward, tokens


def piece_attributions(model, mp: ModelPair, method: str, steps: int = IG_STEPS, with_delta: bool = False,
                       targets: Sequence[int] | None = None, budget: int = ATTRIBUTION_BYTES
                       ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attribution of each source piece to each forced piece: [T, S] (T = out_ids incl. EOS, or the
    `targets` positions only). With with_delta (integrated gradients): also captum's convergence
    delta per target [T]: sum of attributions - (F(x) - F(baseline)).

    Targets go through captum in batches of rows (one row per target, and per step of the path for
    integrated gradients) sized so that a batch takes at most `budget` bytes (row_bytes). The rows do
    not interact, so each row's gradient is its own target's: batching changes the speed, not the
    numbers (tested against one target at a time). A place in the compute queue is held throughout
    (runtime.compute_queue: the app's users share the cores; background analyses do not queue)."""
    from captum.attr import InputXGradient, IntegratedGradients

    if method not in ATTRIBUTIONS:
        raise ValueError(f"attribution method must be one of {ATTRIBUTIONS}, not {method!r}")
    wanted = list(range(len(mp.out_ids)) if targets is None else targets)
    per_batch = rows_per_batch(model.cfg, len(mp.src_ids), len(mp.out_ids), budget)
    rows, deltas = [], []
    with QUEUE.slot():
        match_threads()
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
    matrix = torch.cat(rows).numpy() if rows else np.zeros((0, len(mp.src_ids)), dtype=np.float32)   # [T, S]
    if with_delta:
        return matrix, (torch.cat(deltas).numpy() if deltas else np.zeros(0, dtype=np.float32))
    return matrix


def attribution_matrix(model, mp: ModelPair, method: str, steps: int = IG_STEPS) -> np.ndarray:
    """Word-level attributions [target words, source words] (signed)."""
    return word_matrix(piece_attributions(model, mp, method, steps), mp.tgt_groups, mp.src_groups)
