"""Greedy decoding and sampling: one hypothesis per sentence, batched.

Both walk the same loop and differ only in the choice of the next token (argmax, or a draw from
the tempered, top-k / top-p filtered distribution), so they share `_single_path`. Finished
sentences keep their row (fixed shape) and receive PAD until every sentence is done.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import (NEG_INF, Decoded, Hypothesis, as_batch, check_config, check_prefix, constrain,
                                    decoding_session, max_lengths, normalize, prefix_logprobs, special_ids, start,
                                    with_given)

Chooser = Callable[[torch.Tensor], torch.Tensor]                              # [B, V] -> [B]


def greedy_search(model: nn.Module, src, cfg: DecodeConfig | None = None, *, prefix: Sequence[int] | None = None,
                  ablate=(), use_cache: bool = True, given: Sequence[int] | None = None) -> list[Decoded]:
    """The most probable next token at every step. src: LongTensor [B, S] or ragged id lists.
    `given` tokens come before the prefix and score 0 (core.with_given: a target-language tag)."""
    cfg = cfg or DecodeConfig(strategy="greedy")
    return _single_path(model, src, cfg, lambda log_probs: log_probs.argmax(dim=-1), prefix, ablate, use_cache,
                        given)


def sample(model: nn.Module, src, cfg: DecodeConfig | None = None, *, prefix: Sequence[int] | None = None,
           ablate=(), use_cache: bool = True, given: Sequence[int] | None = None) -> list[Decoded]:
    """Draw each token from softmax(log_probs / temperature), optionally cut to top-k and top-p.

    Seeded by cfg.seed through a private generator: the same inputs and config give the same
    output, and the global RNG is left alone.
    """
    cfg = cfg or DecodeConfig(strategy="sample")
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    generator.manual_seed(int(cfg.seed))

    def choose(log_probs: torch.Tensor) -> torch.Tensor:                       # [B, V] -> [B]
        logits = filter_logits(log_probs / cfg.temperature, cfg.top_k, cfg.top_p)  # [B, V]
        probs = torch.softmax(logits, dim=-1)                                  # [B, V]
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)     # [B]

    return _single_path(model, src, cfg, choose, prefix, ablate, use_cache, given)


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Set to -inf everything outside the top_k tokens and outside the smallest set with mass >= top_p."""
    if top_k and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]                       # [B, 1]
        logits = logits.masked_fill(logits < kth, NEG_INF)                     # [B, V]
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)            # [B, V]
        probs = torch.softmax(sorted_logits, dim=-1)                           # [B, V]
        before = probs.cumsum(dim=-1) - probs                                  # mass of better tokens [B, V]
        drop_sorted = before >= top_p                                          # the best token always stays
        drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)   # [B, V]
        logits = logits.masked_fill(drop, NEG_INF)                             # [B, V]
    return logits


def _single_path(model: nn.Module, src, cfg: DecodeConfig, choose: Chooser, prefix: Sequence[int] | None,
                 ablate, use_cache: bool, given: Sequence[int] | None = None) -> list[Decoded]:
    check_config(cfg, model)
    prefix, n_given = with_given(given, prefix)
    prefix = check_prefix(prefix, model)
    special = special_ids(model)
    with decoding_session(model, ablate):
        src, src_len = as_batch(src, model)                                   # [B, S], [B]
        batch, n_prefix = src.shape[0], len(prefix)
        limit = max_lengths(src_len, cfg, model.cfg.max_len, n_prefix)        # [B]
        longest = int(limit.max())
        step, first = start(model, src, prefix, 1, use_cache)                 # [B, P+1, V]
        tokens = torch.full((batch, longest), special.pad, dtype=torch.long, device=src.device)  # [B, L]
        logprobs = torch.zeros(batch, longest, device=src.device)             # [B, L]
        if n_prefix:
            tokens[:, :n_prefix] = torch.tensor(prefix, device=src.device)
            logprobs[:, :n_prefix] = prefix_logprobs(first, prefix, n_given)  # [B, P]
        done = torch.zeros(batch, dtype=torch.bool, device=src.device)        # [B]
        next_lp = first[:, -1]                                                # [B, V]
        for t in range(n_prefix, longest):
            allowed = constrain(next_lp.clone(), t, cfg.min_len, special)     # [B, V]
            choice = choose(allowed)                                          # [B]
            token_lp = next_lp.gather(1, choice.unsqueeze(1)).squeeze(1)      # [B]
            tokens[:, t] = choice.masked_fill(done, special.pad)
            logprobs[:, t] = token_lp.masked_fill(done, 0.0)
            done |= (choice == special.eos) | (t + 1 >= limit)
            if bool(done.all()):
                break
            next_lp = step.feed(tokens[:, t:t + 1])[:, -1]                    # [B, V]
    return [_hypothesis(tokens[b], logprobs[b], int(limit[b]), cfg, special.eos) for b in range(batch)]


def _hypothesis(tokens: torch.Tensor, logprobs: torch.Tensor, limit: int, cfg: DecodeConfig, eos: int) -> Decoded:
    """Cut one row at its first EOS (kept) or at its length limit."""
    ids = tokens[:limit].tolist()
    length = ids.index(eos) + 1 if eos in ids else limit
    ids, lps = ids[:length], logprobs[:length].tolist()
    score = float(sum(lps))
    hyp = Hypothesis(ids=ids, token_logprobs=lps, score=score, normalized=normalize(score, len(ids), cfg),
                     finished=bool(ids) and ids[-1] == eos, eos_id=eos)
    return Decoded(hypotheses=[hyp], max_len=limit)
