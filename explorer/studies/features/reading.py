"""What a dictionary reads in one sentence, and what one of its features does where it fires most.

sentence_features: the translation teacher-forced once, what the site's dictionary reads (the FFN input,
or the stream) encoded by it, the strongest features at every position (encoder sites: each source piece; decoder sites:
each target position, the piece it reads and the one it writes).

context_effects: the feature removed (steering.clamped at 0, the dictionary's error kept) at each of its
top training contexts, teacher-forced on that training pair: an exact causal effect, measured, not read
off the weights. Its effect on a token is log p with the feature minus log p without it. Decoder
features: the mean effect over the vocabulary at the position where it fired, whose extremes are the
tokens it raises and lowers. Encoder features: for each context the output token it helps most, the
word the feature's source piece most helps to write (with the training pair's alignment beside it on
the page, the "aligned output token"), and the cross-attention heads that read it most: the size of the
change of each head's write to the decoder's stream (its per-head output times its slice of W^O, summed
over the target positions) when the feature is removed.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from explorer.data.batching import pad_batch
from explorer.data.encoded import encode_pairs
from explorer.studies.features.sites import site_inputs
from explorer.studies.features.steering import clamped

SHOWN = 5                 # features listed per position


@dataclass(frozen=True)
class SentenceFeatures:
    site: str
    features: np.ndarray        # [L, SHOWN] int64: the strongest features at each position (-1: fewer fired)
    values: np.ndarray          # [L, SHOWN] float32: their activations, strongest first (0 where -1)


@torch.no_grad()
def sentence_features(model, tc, site: str, src_ids: Sequence[int], out_ids: Sequence[int],
                      shown: int = SHOWN) -> SentenceFeatures:
    """The strongest features of `tc` at `site` for one sentence and its output (EOS included), teacher-forced."""
    start = model.cfg.special.start
    x = site_inputs(model, site, torch.tensor([list(src_ids)]), torch.tensor([[start] + list(out_ids)[:-1]]))
    z = tc.encode(x[0])                                                          # [L, m]
    values, features = z.topk(min(shown, tc.width), dim=-1)                      # [L, shown]
    features = torch.where(values > 0, features, torch.full_like(features, -1))
    return SentenceFeatures(site, features.numpy(), values.clamp_min(0).numpy())


@dataclass(frozen=True)
class ContextEffects:
    site: str
    feature: int
    contexts: int                          # contexts measured
    raised: list[tuple[int, float]]        # decoder: (token id, mean effect on its log p), largest first
    lowered: list[tuple[int, float]]       # decoder: the same, most negative first
    helps: list[tuple[int, float]]         # encoder: per context, (output position, effect on its log p),
                                           # the output token it helps most
    heads: np.ndarray | None = None        # encoder: [decoder layers, heads] the mean change of each
                                           # cross-attention head's write when the feature is removed


@torch.no_grad()
def context_effects(model, tokenizer, tc, site: str, feature: int, pairs: Sequence,
                    contexts: Sequence[tuple[int, int, float]], shown: int = 10) -> ContextEffects:
    """The feature removed at each context (pair, position, activation) of `pairs` (the training split)."""
    if not contexts:
        return ContextEffects(site, feature, 0, [], [], [])
    cfg = model.cfg
    encoded = encode_pairs(tokenizer, [pairs[p] for p, _, _ in contexts], cfg.max_len, cfg.special)
    src = pad_batch([list(s) for s in encoded.src], cfg.pad_id)                              # [B, S]
    tgt_in = pad_batch([list(t[:-1]) for t in encoded.tgt], cfg.pad_id)                      # [B, T]
    tgt_out = pad_batch([list(t[1:]) for t in encoded.tgt], cfg.pad_id)                      # [B, T]
    encoder = site.startswith("encoder.")
    mask = torch.zeros(src.shape if encoder else tgt_in.shape, dtype=torch.bool)           # [B, L]
    rows = torch.arange(len(contexts))
    where = torch.tensor([q for _, q, _ in contexts])
    if (where >= mask.shape[1]).any():
        raise ValueError("a context's position lies beyond its pair (contexts built for another tokenizer?)")
    mask[rows, where] = True
    with _head_writes(model, tgt_out != cfg.pad_id) as writes:     # real positions: a start id may be the pad id
        before = torch.log_softmax(model.logits(src, tgt_in).float(), dim=-1)               # [B, T, V]
        with clamped(model, site, tc, feature, 0.0, mask):
            after = torch.log_softmax(model.logits(src, tgt_in).float(), dim=-1)            # [B, T, V]
    if not encoder:
        change = (before[rows, where] - after[rows, where]).mean(0)                          # [V]
        up, down = change.topk(shown), (-change).topk(shown)
        return ContextEffects(site, feature, len(contexts),
                              [(int(i), float(v)) for v, i in zip(up.values, up.indices)],
                              [(int(i), -float(v)) for v, i in zip(down.values, down.indices)], [])
    forced = (before - after).gather(2, tgt_out.unsqueeze(-1)).squeeze(-1)                   # [B, T]
    forced = forced.masked_fill(tgt_out == cfg.pad_id, -float("inf"))
    help_, position = forced.max(dim=1)                                                     # [B]
    heads = torch.stack([(after_w - before_w).norm(dim=(-2, -1)).mean(0)                        # [H]
                         for before_w, after_w in writes]).numpy()                                    # [L, H]
    return ContextEffects(site, feature, len(contexts), [], [],
                          [(int(p), float(h)) for p, h in zip(position, help_)], heads)


def cross_attentions(model) -> list:
    """The decoder's cross-attention modules, first layer first."""
    return [m for name, m in model.named_modules() if name.startswith("decoder.") and name.endswith(".cross_attn")]


@contextmanager
def _head_writes(model, real: torch.Tensor) -> Iterator[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Within the block, each pass's per-head writes of every cross-attention layer, in pairs per layer
    (first pass, second pass): context_h @ W_O[:, h]^T, [B, H, T, d], pad positions (real False) zeroed.
    The pairs are filled when the block ends."""
    seen: list[list[torch.Tensor]] = [[] for _ in cross_attentions(model)]
    handles = []
    for layer, attn in enumerate(cross_attentions(model)):
        def record(_m, _args, context, layer=layer, attn=attn):
            h, dh = attn.n_heads, attn.d_head
            w_o = attn.w_o.weight.view(-1, h, dh)                                        # [d, H, dh]
            write = torch.einsum("bhtk,dhk->bhtd", context.float(), w_o.float())          # [B, H, T, d]
            seen[layer].append(write * real[:, None, :, None])
        handles.append(attn.context.register_forward_hook(record))
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    try:
        yield pairs
    finally:
        for handle in handles:
            handle.remove()
        pairs.extend((passes[0], passes[1]) for passes in seen if len(passes) == 2)
