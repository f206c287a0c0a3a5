"""Token-count batching: batches of similar lengths, bounded by padded tokens, not sentences.

Sorting the whole corpus by length would give every epoch the same batches in the same length
order; sorting only within large random buckets keeps padding low (~6%) while batches still mix.
The bound is on padded tokens per side (max_len * n), which is what memory and compute scale with.
"""
from __future__ import annotations

import random

import torch

from explorer.text.special import PAD_ID


def make_batches(lengths: list[tuple[int, int]], max_tokens: int, seed: int,
                 shuffle: bool = True, bucket_size: int | None = None) -> list[list[int]]:
    """Group example indices into batches whose padded size per side is <= max_tokens.

    lengths[i] = (src_len, tgt_len) of example i. An example longer than max_tokens on its own
    still gets a batch of one (never dropped). Deterministic for a given seed; with shuffle=False
    examples are taken in length order and batches keep that order (for evaluation).
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    n = len(lengths)
    order = list(range(n))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
        bucket = bucket_size or max(1, 100 * max(1, max_tokens // 32))   # ~100 batches per bucket
    else:
        bucket = n or 1
    batches: list[list[int]] = []
    for start in range(0, n, bucket):
        chunk = sorted(order[start:start + bucket], key=lambda i: (lengths[i][0], lengths[i][1], i))
        batch: list[int] = []
        max_src = max_tgt = 0
        for i in chunk:
            s, t = lengths[i]
            new_src, new_tgt = max(max_src, s), max(max_tgt, t)
            if batch and max(new_src, new_tgt) * (len(batch) + 1) > max_tokens:
                batches.append(batch)
                batch, new_src, new_tgt = [], s, t
            batch.append(i)
            max_src, max_tgt = new_src, new_tgt
        if batch:
            batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


def pad_batch(seqs: list[list[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-pad id lists into a LongTensor [B, T] (T = longest sequence, at least 1)."""
    width = max([len(s) for s in seqs] + [1])
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)     # [B, T]
    for row, s in enumerate(seqs):
        if s:
            out[row, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out
