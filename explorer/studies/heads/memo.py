"""The full model's encoder output per source batch, kept for the passes that remove only decoder heads.

Removing a decoder self-attention or cross-attention head (its context gated to 0, or W^O's columns
zeroed) changes nothing before the decoder: the encoder makes the same calls on the same inputs and
returns the same tensor, bit for bit. So the head lab's teacher-forced passes (the loss of each
removal, the one-pass check of each single removal's outputs) take the encoder output that an earlier
pass computed for the same source batch, and only an encoder head's removal runs the encoder again.
At base size the encoder is about a quarter of a teacher-forced pass, and two thirds of the heads are
decoder or cross heads. The head lab's JSON is the same with and without it (`--no-reuse`,
tests/unit/test_heads_memo.py).

A batch is known by its source ids (shape and bytes), so passes that batch the same sentences alike
share it. Kept up to MEMO_BYTES; a batch beyond that is encoded each time, as before, so a large
set never holds more.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

MEMO_BYTES = 256 * 2**20              # encoder outputs kept at most (float32 [B, S, d] per batch)


def removes_encoder_heads(removed: Iterable[tuple[str, int, int]]) -> bool:
    """Whether a set of removed heads (kind, layer, head) touches the encoder (then nothing is reused)."""
    return any(kind == "encoder" for kind, _, _ in removed)


class EncoderMemo:
    """Encoder outputs (memory [B, S, d], src_mask [B, 1, 1, S]) by source batch. The caller
    promises that the model it passes has the full model's encoder (no encoder head removed):
    the head lab's model and its HeadRemover copy both do whenever only decoder heads are removed."""

    def __init__(self, budget: int = MEMO_BYTES):
        self.budget = budget
        self.kept: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.bytes = 0
        self.reused = self.encoded = 0            # batches taken from the memo / encoded

    @torch.no_grad()
    def encode(self, model: nn.Module, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = (tuple(src.shape), str(src.device), src.cpu().numpy().tobytes())
        found = self.kept.get(key)
        if found is not None:
            self.reused += 1
            return found
        memory, src_mask = model.encode(src)                                  # [B, S, d], [B, 1, 1, S]
        self.encoded += 1
        size = memory.numel() * memory.element_size() + src_mask.numel() * src_mask.element_size()
        if self.bytes + size <= self.budget:
            self.kept[key] = (memory, src_mask)
            self.bytes += size
        return memory, src_mask


def teacher_log_probs(model: nn.Module, src: torch.Tensor, tgt_in: torch.Tensor,
                      memo: EncoderMemo | None = None) -> torch.Tensor:
    """model(src, tgt_in): teacher-forced log-probs [B, T, V], with the encoder output from `memo`
    when one is given (Transformer.forward's own two steps: encode, then decode and generate)."""
    if memo is None:
        return model(src, tgt_in)                                             # [B, T, V]
    memory, src_mask = memo.encode(model, src)                                # [B, S, d], [B, 1, 1, S]
    return model.generator(model.decode(tgt_in, memory, src_mask))            # [B, T, V]
