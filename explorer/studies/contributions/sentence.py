"""ALTI+ for one sentence pair: every layer's contribution matrices, their rollout, each generated
token's source share, as plain numpy data for the command, the measurements and a page.

The pair is teacher-forced: the forced output may be the model's own translation or a reference (or
anything else the model can read), and the contributions say how the model would produce *that*
output. Position i of the target side is the token the model writes at step i (out_ids[i]); the
target-prefix columns are the decoder's inputs at that step (the start id, then out_ids[:-1]).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from explorer.studies.contributions.blocks import forced_pass
from explorer.studies.contributions.decomposition import contributions
from explorer.studies.contributions.rollout import decoder_rollout, encoder_rollout
from explorer.decoding.core import special_ids


@dataclass(frozen=True)
class SentenceContributions:
    src_ids: list[int]               # encoder input, EOS included: S
    out_ids: list[int]               # forced output, EOS included: T
    encoder: np.ndarray              # [Le, S, S] per encoder layer, self-attention contributions
    decoder_self: np.ndarray         # [Ld, T, T] per decoder layer, self-attention (lower triangular)
    cross: np.ndarray                # [Ld, T, S + 1] per decoder layer; the last column is the residual
    cross_attention: np.ndarray      # [Ld, T, S] the raw cross-attention, heads averaged, beside it
    encoder_rollout: np.ndarray      # [S, S] each encoder output over the source tokens
    rollout: np.ndarray              # [Ld, T, S + T] after each decoder layer, over [source; decoder inputs]
    token_logprobs: list[float]      # log p(out_ids[i] | source, out_ids[:i])
    fallback_rows: int               # rows where every term was clipped away (decomposition.normalise)

    @property
    def n_src(self) -> int:
        return len(self.src_ids)

    @property
    def source_share(self) -> np.ndarray:
        """Each output token's share of the source after the last layer: [T], in [0, 1]."""
        return self.rollout[-1][:, :self.n_src].sum(axis=-1)

    @property
    def cross_source(self) -> np.ndarray:
        """Each layer's cross-attention contributions over the source only, renormalised per row (the
        residual column dropped): [Ld, T, S], an aligner of its own beside raw attention."""
        source = self.cross[:, :, :self.n_src]
        total = source.sum(axis=-1, keepdims=True)
        return np.divide(source, total, out=np.zeros_like(source), where=total > 0)


def check_ids(model: nn.Module, src_ids: Sequence[int], out_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Ids the model can read: non-empty, within its vocabularies and max_len, no padding or start id
    among the forced outputs; ValueError says which."""
    cfg, special = model.cfg, special_ids(model)
    src, out = [int(i) for i in src_ids], [int(i) for i in out_ids]
    for side, ids, vocab in (("source", src, cfg.src_vocab_size), ("output", out, cfg.tgt_vocab_size)):
        if not ids:
            raise ValueError(f"the {side} has no tokens")
        if len(ids) > cfg.max_len:
            raise ValueError(f"the {side} has {len(ids)} tokens, more than the model's max_len {cfg.max_len}")
        if any(not 0 <= i < vocab for i in ids):
            raise ValueError(f"{side} ids must be in [0, {vocab - 1}]")
    if any(i in special.never_output for i in out):
        raise ValueError(f"the forced output may not hold the pad or start id ({special.pad}/{special.start})")
    return src, out


def _numpy(tensors) -> np.ndarray:
    return torch.stack(list(tensors)).cpu().numpy()


def sentence_contributions(model: nn.Module, src_ids: Sequence[int], out_ids: Sequence[int]) -> SentenceContributions:
    """ALTI+ of one teacher-forced pair (see the module docstring); float64 throughout the analysis."""
    src, out = check_ids(model, src_ids, out_ids)
    forced = forced_pass(model, src, out)
    fallbacks = 0
    per_kind = {}
    for kind, blocks in (("encoder", forced.encoder), ("self", forced.decoder_self), ("cross", forced.cross)):
        matrices = []
        for block in blocks:
            c, empty = contributions(block)                                       # [T, K(+1)]
            matrices.append(c)
            fallbacks += empty
        per_kind[kind] = matrices
    enc_rolled = encoder_rollout(per_kind["encoder"])
    dec_rolled = decoder_rollout(per_kind["self"], per_kind["cross"], enc_rolled[-1])
    return SentenceContributions(
        src_ids=src, out_ids=out, encoder=_numpy(per_kind["encoder"]), decoder_self=_numpy(per_kind["self"]),
        cross=_numpy(per_kind["cross"]), cross_attention=_numpy(b.weights.mean(dim=0) for b in forced.cross),
        encoder_rollout=enc_rolled[-1].cpu().numpy(), rollout=_numpy(dec_rolled),
        token_logprobs=forced.token_logprobs, fallback_rows=fallbacks)
