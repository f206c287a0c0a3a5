"""Beam search for a test set: explorer.decoding.beam's search, with finished sentences dropped from the
decoder's batch.

The library's beam search keeps every sentence of a batch in the decoder until the last one stops (a
fixed [batch, k] shape, which its trace relies on). Over a test set with a wide beam that is most of the
work: sentences stop at very different steps, and a finished sentence's k rows still run through every
decoder layer and the projection onto the vocabulary. Here the beam state keeps its full shape (the same
`expand`/`finish`/`select`/`truncate`/`stop` steps, so the same hypotheses, scores and stopping), but the
decoder (its cache, the memory, the source mask) holds only the rows of sentences still running; a
finished sentence's rows get the log-probs they had last, which nothing reads (its pool is closed: no
entry joins it, its stop reason is kept). The beam curve calls this; the app's pages keep the library's
search, whose trace needs the fixed shape. No prefix but the given tokens (a multilingual model's target
tag, forced and scoring 0 as in the library's search), no ablation, no trace.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding import beam
from explorer.decoding.core import (Decoded, as_batch, check_config, check_prefix, constrain, decoding_session,
                                    max_lengths, prefix_logprobs, special_ids, start, with_given)


def compact_beam_search(model: nn.Module, src: Sequence[Sequence[int]] | torch.Tensor,
                        cfg: DecodeConfig, *, given: Sequence[int] = ()) -> list[Decoded]:
    """The n-best hypotheses per source, as explorer.decoding.beam.beam_search(model, src, cfg, given=given)
    gives them. `given`: the tokens every output starts with, scoring 0 (a target-language tag)."""
    check_config(cfg, model, beam=True)
    forced, n_given = with_given(given, None)
    forced = check_prefix(forced, model)
    special = special_ids(model)
    k = cfg.beam_size
    with decoding_session(model):
        src, src_len = as_batch(src, model)                                   # [B, S], [B]
        batch, n_forced = src.shape[0], len(forced)
        limit = max_lengths(src_len, cfg, model.cfg.max_len, n_forced)        # [B]
        step, first = start(model, src, forced, k)                            # [B*K, P+1, V]
        forced_lp = prefix_logprobs(first, forced, n_given).view(batch, k, -1)[:, 0]   # [B, P]
        state = beam.init_state(batch, k, forced_lp.sum(dim=1), limit, cfg)
        log_probs = first[:, -1].contiguous()                                 # [B*K, V]
        live = torch.arange(batch, device=src.device)                         # [A] sentences in the decoder
        first_limit, longest = int(limit.min()), int(limit.max())
        for t in range(n_forced, longest):
            log_probs = constrain(log_probs, t, cfg.min_len, special)         # [B*K, V]
            cands = beam.expand(state, log_probs, special.eos)
            beam.finish(state, cands, t, cfg)
            index = beam.select(state, cands, special.eos)                    # [B*K]
            at_limit = beam.truncate(state, t, cfg, first_limit)              # [B] or None
            if beam.stop(state, at_limit, cfg):
                break
            live = _follow(step, index.view(batch, k), live, state.done, k)
            new = step.feed(state.tokens[live].view(-1, 1))[:, -1]            # [A*K, V]
            log_probs.view(batch, k, -1)[live] = new.view(-1, k, new.shape[-1])
    return beam._results(state, cfg, forced, forced_lp, None, special.eos)


def _follow(step, index: torch.Tensor, live: torch.Tensor, done: torch.Tensor, k: int) -> torch.Tensor:
    """Re-parent the decoder's rows as `select` chose (index [B, K]: rows of the full batch) and drop the
    rows of sentences that just finished; returns the sentences still in the decoder [A']."""
    keep = (~done[live]).nonzero().squeeze(1)                                 # [A'] places in `live`
    still = live[keep]                                                        # [A'] sentence ids
    slot = index[still] - still.unsqueeze(1) * k                              # [A', K] parent slot
    rows = (keep.unsqueeze(1) * k + slot).view(-1)                            # [A'*K] rows of the decoder now
    if len(still) == len(live):
        step.reorder(rows)
    else:                                                                     # fewer sentences: memory too
        step.reorder(rows, cross_too=True)
        step.memory = step.memory.index_select(0, rows)                       # [A'*K, S, d]
        if step.src_mask is not None:
            step.src_mask = step.src_mask.index_select(0, rows)               # [A'*K, 1, 1, S]
    return still
