"""Batched beam search with a fixed-shape state and one named helper per part of a step.

Each step: `expand` (the 2k best extensions of the k live hypotheses, scored cumulatively),
`finish` (EOS extensions ranked within the best k enter the finished pool), `select` (the k best
non-EOS extensions become the live hypotheses; the cache follows their parents), `truncate`
(sentences at their length limit pool their live hypotheses), `stop` (per-sentence done flags).
All tensors keep the shape [batch, k, ...] throughout (Hugging Face's layout, not fairseq's
shrinking batches): a finished sentence rides along and is ignored.

Stopping. Canonical (default): a sentence stops when its pool holds k hypotheses and no live one
can beat the worst of them; the bound is exact, not the usual current-length heuristic: future
tokens only lower a cumulative log-prob s <= 0, so the best normalised score reachable is
s / lp(max_len) (lp grows with length for average and GNMT with alpha >= 0, and is 1 for none).
`early_stopping=True`: stop as soon as k hypotheses have finished. An EOS extension finishes a
hypothesis only if it ranks within the best k candidates (as in HF), which makes beam size 1 pick
exactly greedy's tokens; with length penalty none it then also stops where greedy stops. With a
length penalty and canonical stopping, beam 1 may continue past greedy's EOS when a longer
hypothesis could still normalise better: that is the stopping rule working, not a bug.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.beam_trace import FINISHED, KEPT, PRUNED, TRUNCATED, TraceRecorder
from explorer.decoding.core import (EOS_ID, NEG_INF, PAD_ID, Decoded, Hypothesis, as_batch, check_config,
                                    check_prefix, constrain, decoding_session, length_penalty, max_lengths,
                                    prefix_logprobs, start)

STOP_REASONS = ("running", "canonical", "early_stopping", "max_len")


@dataclass
class BeamState:
    """Live hypotheses and the finished pool of every sentence; shapes never change."""

    tokens: torch.Tensor        # [B, K, L] output tokens of the live hypotheses (PAD beyond t)
    logprobs: torch.Tensor      # [B, K, L] their per-token log-probs
    scores: torch.Tensor        # [B, K] cumulative log-probs, best first (-inf = empty slot)
    rows: torch.Tensor          # [B, K] trace id (step * 2K + rank) of the candidate each slot came from
    pool_tokens: torch.Tensor   # [B, K, L] finished hypotheses, best normalised score first
    pool_logprobs: torch.Tensor  # [B, K, L]
    pool_len: torch.Tensor      # [B, K] output length (EOS included)
    pool_score: torch.Tensor    # [B, K] cumulative log-prob
    pool_norm: torch.Tensor     # [B, K] normalised score (-inf = empty)
    pool_eos: torch.Tensor      # [B, K] ended with EOS (False: cut at the length limit)
    pool_rows: torch.Tensor     # [B, K] trace id of the finishing candidate
    limit: torch.Tensor         # [B] output-length limit
    done: torch.Tensor          # [B]
    stop_reason: torch.Tensor   # [B] index into STOP_REASONS


@dataclass
class Candidates:
    """The 2K best extensions of one step, per sentence, sorted by cumulative score."""

    score: torch.Tensor         # [B, 2K]
    parent: torch.Tensor        # [B, 2K] slot of the live hypothesis extended
    token: torch.Tensor         # [B, 2K]
    token_logprob: torch.Tensor  # [B, 2K]
    normalized: torch.Tensor    # [B, 2K]
    finished: torch.Tensor      # [B, 2K] EOS within the best K of an active sentence
    slot: torch.Tensor          # [B, 2K] new live slot, -1 if not kept (set by select)


def init_state(batch: int, k: int, longest: int, prefix: list[int], prefix_lp: torch.Tensor,
               limit: torch.Tensor) -> BeamState:
    """Slot 0 holds BOS + prefix with its forced score; the other slots are empty (-inf)."""
    device = limit.device
    tokens = torch.full((batch, k, longest), PAD_ID, dtype=torch.long, device=device)   # [B, K, L]
    logprobs = torch.zeros(batch, k, longest, device=device)                           # [B, K, L]
    if prefix:
        tokens[:, :, :len(prefix)] = torch.tensor(prefix, device=device)
        logprobs[:, :, :len(prefix)] = prefix_lp.view(batch, k, -1)
    scores = torch.full((batch, k), NEG_INF, device=device)                           # [B, K]
    scores[:, 0] = logprobs[:, 0].sum(dim=1)
    return BeamState(tokens=tokens, logprobs=logprobs, scores=scores,
                     rows=torch.zeros(batch, k, dtype=torch.long, device=device),
                     pool_tokens=torch.full_like(tokens, PAD_ID), pool_logprobs=torch.zeros_like(logprobs),
                     pool_len=torch.zeros(batch, k, dtype=torch.long, device=device),
                     pool_score=torch.full_like(scores, NEG_INF), pool_norm=torch.full_like(scores, NEG_INF),
                     pool_eos=torch.zeros(batch, k, dtype=torch.bool, device=device),
                     pool_rows=torch.full((batch, k), -1, dtype=torch.long, device=device),
                     limit=limit, done=torch.zeros(batch, dtype=torch.bool, device=device),
                     stop_reason=torch.zeros(batch, dtype=torch.long, device=device))


def expand(state: BeamState, log_probs: torch.Tensor, t: int, cfg: DecodeConfig) -> Candidates:
    """The 2K best (hypothesis, next token) pairs by cumulative score. log_probs [B*K, V] (constrained)."""
    batch, k = state.scores.shape
    vocab = log_probs.shape[-1]
    total = (state.scores.unsqueeze(2) + log_probs.view(batch, k, vocab)).view(batch, k * vocab)  # [B, K*V]
    score, flat = total.topk(2 * k, dim=1)                                   # [B, 2K]
    token_lp = log_probs.view(batch, k * vocab).gather(1, flat)              # [B, 2K]
    token = flat % vocab                                                      # [B, 2K]
    in_top_k = torch.arange(2 * k, device=flat.device) < k                    # [2K]
    finished = (token == EOS_ID) & in_top_k & ~state.done.unsqueeze(1)       # [B, 2K]
    return Candidates(score=score, parent=flat // vocab, token=token, token_logprob=token_lp,
                      normalized=score / length_penalty(t + 1, cfg.length_penalty, cfg.alpha),
                      finished=finished, slot=torch.full_like(flat, -1))


def finish(state: BeamState, cands: Candidates, t: int) -> None:
    """Move EOS extensions ranked within the best K into the pool (which keeps the K best)."""
    if not bool(cands.finished.any()):
        return
    tokens, logprobs = _extend(state, cands.parent, cands.token, cands.token_logprob, t)   # [B, 2K, L]
    two_k = cands.score.shape[1]
    rows = t * two_k + torch.arange(two_k, device=cands.score.device).expand_as(cands.score)  # [B, 2K]
    _pool(state, cands.finished, cands.normalized, cands.score, tokens, logprobs,
          torch.full_like(cands.parent, t + 1), torch.ones_like(cands.finished), rows)


def select(state: BeamState, cands: Candidates, t: int) -> torch.Tensor:
    """The K best non-EOS extensions become the live hypotheses; returns the row index [B*K] for the cache."""
    batch, k = state.scores.shape
    live_score = cands.score.masked_fill(cands.token == EOS_ID, NEG_INF)     # [B, 2K]
    _, pick = live_score.topk(k, dim=1)                                       # [B, K] sorted best first
    cands.slot.scatter_(1, pick, torch.arange(k, device=pick.device).expand_as(pick))
    parent = cands.parent.gather(1, pick)                                     # [B, K]
    state.tokens, state.logprobs = _extend(state, parent, cands.token.gather(1, pick),
                                           cands.token_logprob.gather(1, pick), t)      # [B, K, L]
    state.scores = cands.score.gather(1, pick)                                # [B, K]
    state.rows = t * 2 * k + pick                                             # [B, K]
    offset = torch.arange(batch, device=pick.device).unsqueeze(1) * k         # [B, 1]
    return (parent + offset).view(-1)                                         # [B*K]


def truncate(state: BeamState, t: int, cfg: DecodeConfig) -> torch.Tensor:
    """Sentences whose live hypotheses reached the length limit pool them (no EOS). Returns [B] mask."""
    at_limit = (t + 1 >= state.limit) & ~state.done                           # [B]
    if bool(at_limit.any()):
        k = state.scores.shape[1]
        norm = state.scores / length_penalty(t + 1, cfg.length_penalty, cfg.alpha)   # [B, K]
        _pool(state, at_limit.unsqueeze(1).expand(-1, k), norm, state.scores, state.tokens, state.logprobs,
              torch.full_like(state.rows, t + 1), torch.zeros_like(state.pool_eos), state.rows)
    return at_limit


def stop(state: BeamState, at_limit: torch.Tensor, cfg: DecodeConfig) -> bool:
    """Mark sentences done (recording why); True when every sentence is."""
    full = state.pool_norm[:, -1] > NEG_INF                                   # [B] pool holds K
    if cfg.early_stopping:
        settled, reason = full, STOP_REASONS.index("early_stopping")
    else:
        best_reachable = state.scores[:, 0] / length_penalty(state.limit, cfg.length_penalty, cfg.alpha)  # [B]
        settled, reason = full & (best_reachable <= state.pool_norm[:, -1]), STOP_REASONS.index("canonical")
    new = ~state.done & (settled | at_limit)                                  # [B]
    state.stop_reason[new & settled] = reason
    state.stop_reason[new & ~settled] = STOP_REASONS.index("max_len")
    state.done |= new
    return bool(state.done.all())


def beam_search(model: nn.Module, src, cfg: DecodeConfig | None = None, *, prefix: Sequence[int] | None = None,
                ablate=(), trace: bool = False, use_cache: bool = True) -> list[Decoded]:
    """n-best hypotheses per source (min(n_best, beam_size), best normalised score first).

    src: LongTensor [B, S] or ragged id lists (EOS included). `prefix` forces the first output
    tokens of every sentence; `ablate` zeroes (kind, layer, head) heads; `trace` adds a BeamTrace.
    """
    cfg = cfg or DecodeConfig()
    check_config(cfg, model)
    prefix = check_prefix(prefix, model)
    k = cfg.beam_size
    with decoding_session(model, ablate):
        src, src_len = as_batch(src, model)                                   # [B, S], [B]
        batch, n_prefix = src.shape[0], len(prefix)
        limit = max_lengths(src_len, cfg, model.cfg.max_len, n_prefix)        # [B]
        step, first = start(model, src, prefix, k, use_cache)                 # [B*K, P+1, V]
        state = init_state(batch, k, int(limit.max()), prefix, prefix_logprobs(first, prefix), limit)
        recorder = TraceRecorder(batch, k, cfg.trace_top_k) if trace else None
        if recorder is not None:
            _record_prefix(recorder, state, first, prefix, cfg)
        log_probs = first[:, -1].contiguous()                                 # [B*K, V]
        for t in range(n_prefix, int(limit.max())):
            log_probs = constrain(log_probs, t, cfg.min_len)                  # [B*K, V]
            prev_scores, active = state.scores, ~state.done
            cands = expand(state, log_probs, t, cfg)
            finish(state, cands, t)
            index = select(state, cands, t)                                   # [B*K]
            at_limit = truncate(state, t, cfg)                                # [B]
            if recorder is not None:
                recorder.record_step(prev_scores, log_probs, cands, _status(cands, at_limit), active)
            if stop(state, at_limit, cfg):
                break
            step.reorder(index)
            log_probs = step.feed(state.tokens[:, :, t].reshape(-1, 1))[:, -1]  # [B*K, V]
    return _results(state, cfg, recorder)


def _status(cands: Candidates, at_limit: torch.Tensor) -> torch.Tensor:
    kept = torch.where(at_limit.unsqueeze(1), TRUNCATED, KEPT)                # [B, 1]
    status = torch.where(cands.slot >= 0, kept, PRUNED)                       # [B, 2K]
    return torch.where(cands.finished, FINISHED, status).to(torch.int8)       # [B, 2K]


def _record_prefix(recorder: TraceRecorder, state: BeamState, first: torch.Tensor, prefix: list[int],
                   cfg: DecodeConfig) -> None:
    n, batch, k = len(prefix), *state.scores.shape
    token_lp = state.logprobs[:, 0, :n]                                       # [B, P]
    score = token_lp.cumsum(dim=1)                                            # [B, P]
    lengths = torch.arange(1, n + 1, device=score.device)
    norm = score / length_penalty(lengths, cfg.length_penalty, cfg.alpha)    # [B, P]
    rows = first.view(batch, k, n + 1, -1)[:, 0]                              # [B, P+1, V]
    alts = [constrain(rows[:, i].clone(), i, cfg.min_len) for i in range(n)]  # P x [B, V]
    recorder.record_forced(prefix, token_lp, score, norm, alts)


def _results(state: BeamState, cfg: DecodeConfig, recorder: TraceRecorder | None) -> list[Decoded]:
    batch, k = state.scores.shape
    n = min(cfg.n_best, k)
    norm, score, lens = state.pool_norm.tolist(), state.pool_score.tolist(), state.pool_len.tolist()
    eos, reasons = state.pool_eos.tolist(), [STOP_REASONS[i] for i in state.stop_reason.tolist()]
    tokens, logprobs = state.pool_tokens.tolist(), state.pool_logprobs.tolist()
    out, counts = [], []
    for b in range(batch):
        hyps = [Hypothesis(ids=tokens[b][j][:lens[b][j]], token_logprobs=logprobs[b][j][:lens[b][j]],
                           score=score[b][j], normalized=norm[b][j], finished=eos[b][j])
                for j in range(n) if norm[b][j] > NEG_INF]
        counts.append(len(hyps))
        out.append(Decoded(hypotheses=hyps, max_len=int(state.limit[b]), meta={"stop_reason": reasons[b]}))
    if recorder is not None:
        traces = recorder.build(state.pool_rows, counts, reasons, state.limit.tolist(), cfg)
        out = [Decoded(d.hypotheses, d.max_len, trace, d.meta) for d, trace in zip(out, traces)]
    return out


def _extend(state: BeamState, parent: torch.Tensor, token: torch.Tensor, token_lp: torch.Tensor,
            t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Histories of `parent` [B, M] with `token` written at position t: 2 x [B, M, L]."""
    index = parent.unsqueeze(2).expand(-1, -1, state.tokens.shape[2])         # [B, M, L]
    tokens = state.tokens.gather(1, index)                                    # [B, M, L]
    logprobs = state.logprobs.gather(1, index)                                # [B, M, L]
    tokens[:, :, t] = token
    logprobs[:, :, t] = token_lp
    return tokens, logprobs


def _pool(state: BeamState, take: torch.Tensor, norm: torch.Tensor, score: torch.Tensor, tokens: torch.Tensor,
          logprobs: torch.Tensor, length: torch.Tensor, eos: torch.Tensor, rows: torch.Tensor) -> None:
    """Merge the entries `take` [B, M] into the pool, keeping the K best normalised scores."""
    k = state.pool_norm.shape[1]
    all_norm = torch.cat([state.pool_norm, norm.masked_fill(~take, NEG_INF)], dim=1)   # [B, K+M]
    state.pool_norm, pick = all_norm.topk(k, dim=1)                           # [B, K]
    index = pick.unsqueeze(2).expand(-1, -1, tokens.shape[2])                 # [B, K, L]
    state.pool_tokens = torch.cat([state.pool_tokens, tokens], dim=1).gather(1, index)
    state.pool_logprobs = torch.cat([state.pool_logprobs, logprobs], dim=1).gather(1, index)
    for name, new in (("pool_len", length), ("pool_score", score), ("pool_eos", eos), ("pool_rows", rows)):
        setattr(state, name, torch.cat([getattr(state, name), new], dim=1).gather(1, pick))
