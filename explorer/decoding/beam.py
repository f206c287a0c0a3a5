"""Batched beam search with a fixed-shape state and one named helper per part of a step.

Each step: `expand` (the 2k best extensions of the k live hypotheses, scored cumulatively),
`finish` (EOS extensions ranked within the best k enter the finished pool), `select` (the k best
non-EOS extensions become the live hypotheses; the cache follows their parents), `truncate`
(sentences at their length limit pool their live hypotheses), `stop` (per-sentence done flags).
Tensors keep the shape [batch, k, ...] throughout (Hugging Face's layout, not fairseq's shrinking
batches): a finished sentence rides along and is ignored. Histories are back-pointers (parent,
token, log-prob per step), followed once at the end, so a step costs a few small tensor ops
next to the decoder call, and the trace reads its alternatives from the top-k the step made anyway.

Stopping. Canonical (default): a sentence stops when its pool holds k hypotheses and no live one
can beat the worst of them. The bound is exact, not the usual current-length heuristic: further
tokens only lower a cumulative log-prob s <= 0, so the best normalised score still reachable is
s / lp(max_len) (lp grows with length for average and for GNMT with alpha >= 0; it is 1 for none).
`early_stopping=True`: stop as soon as k hypotheses have finished. An EOS extension finishes a
hypothesis only if it ranks within the best k candidates (as in HF), so beam size 1 picks
greedy's tokens; with length penalty none or early stopping it also stops where greedy stops.
With a length penalty and canonical stopping, beam 1 may go on past greedy's EOS while a longer
hypothesis could still normalise better: that is the stopping rule, not a bug.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.beam_trace import TraceRecorder
from explorer.decoding.core import (NEG_INF, Decoded, Hypothesis, as_batch, check_config, check_prefix, constrain,
                                    decoding_session, length_penalty, max_lengths, prefix_logprobs, special_ids,
                                    start, with_given)
from explorer.text.special import EOS_ID

STOP_REASONS = ("running", "canonical", "early_stopping", "max_len")
POOL_FIELDS = ("score", "step", "parent", "token", "token_lp", "eos", "rank")


@dataclass
class BeamState:
    """Live hypotheses and the finished pool of every sentence; shapes never change."""

    scores: torch.Tensor         # [B, K] cumulative log-probs, best first (-inf = empty slot)
    tokens: torch.Tensor         # [B, K] newest token of each live hypothesis
    limit: torch.Tensor          # [B] output-length limit
    best_lp: torch.Tensor        # [B] length penalty at the limit (the canonical bound's divisor)
    pool_norm: torch.Tensor      # [B, K] normalised scores of finished hypotheses, best first (-inf = empty)
    pool: dict[str, torch.Tensor]  # POOL_FIELDS -> [B, K]: a finished hypothesis is (parent slot
                                   # after step-1, token at step); rank links it to the trace
    done: torch.Tensor           # [B] (replaced, never written in place: the trace keeps old ones)
    stop_reason: torch.Tensor    # [B] index into STOP_REASONS
    history: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    # per free step: (parent slot [B, K], token [B, K], token log-prob [B, K]) of the live slots
    pick: torch.Tensor | None = None   # [B, K] rank of the candidate each live slot came from
    any_done: bool = False
    pool_full: bool = False      # some sentence has K finished hypotheses


@dataclass
class Candidates:
    """The 2K best extensions of one step, per sentence, sorted by cumulative score."""

    score: torch.Tensor          # [B, 2K]
    parent: torch.Tensor         # [B, 2K] slot of the live hypothesis extended
    token: torch.Tensor          # [B, 2K]
    token_logprob: torch.Tensor  # [B, 2K]
    finished: torch.Tensor       # [B, K] EOS among the best K, in a sentence still running
    row_best: tuple[torch.Tensor, torch.Tensor]   # (log-probs, tokens) [B*K, M]: each live hypothesis's
                                                  # M >= 2K best next tokens, best first (the trace's alternatives)


def init_state(batch: int, k: int, prefix_score: torch.Tensor, limit: torch.Tensor, cfg: DecodeConfig) -> BeamState:
    """Slot 0 holds BOS + prefix with its forced score; the other slots are empty (-inf)."""
    device = limit.device
    scores = torch.full((batch, k), NEG_INF, device=device)                   # [B, K]
    scores[:, 0] = prefix_score
    zeros = torch.zeros(batch, k, dtype=torch.long, device=device)            # [B, K]
    pool = {name: zeros.clone() for name in POOL_FIELDS}
    pool["score"], pool["token_lp"] = torch.full_like(scores, NEG_INF), torch.zeros_like(scores)
    pool["eos"] = torch.zeros(batch, k, dtype=torch.bool, device=device)
    return BeamState(scores=scores, tokens=zeros.clone(), limit=limit,
                     best_lp=torch.as_tensor(length_penalty(limit, cfg.length_penalty, cfg.alpha)).float(),
                     pool_norm=torch.full_like(scores, NEG_INF), pool=pool,
                     done=torch.zeros(batch, dtype=torch.bool, device=device),
                     stop_reason=torch.zeros(batch, dtype=torch.long, device=device))


def expand(state: BeamState, log_probs: torch.Tensor, eos: int = EOS_ID, width: int = 0) -> Candidates:
    """The 2K best (hypothesis, next token) pairs by cumulative score. log_probs [B*K, V] (constrained);
    `eos` is the model's EOS id; `width`: keep at least this many best tokens per hypothesis in
    `row_best` (the trace's alternatives), so the trace needs no top-k of its own.

    A hypothesis's score is the same for all its extensions, so each of the 2K best pairs is among
    its own hypothesis's 2K best tokens: one top-k along each row of V, then one over those K x M
    sums, instead of one over K x V sums (the same pairs and the same float sums, without
    materialising [B, K*V]; with a 58k vocabulary that is 290k sums a step). Equal sums rank
    the lower slot first, as a top-k over K x V sums ranked them here.
    """
    batch, k = state.scores.shape
    width = min(max(2 * k, width), log_probs.shape[-1])
    best_lp, best_token = log_probs.topk(width, dim=1)                        # [B*K, M] best first
    total = (state.scores.view(-1, 1) + best_lp).view(batch, k * width)       # [B, K*M]
    score, flat = total.sort(dim=1, descending=True, stable=True)             # [B, K*M]; ties: lower slot first
    score, flat = score[:, :2 * k], flat[:, :2 * k]                           # [B, 2K]
    token = best_token.view(batch, k * width).gather(1, flat)                 # [B, 2K]
    finished = token[:, :k] == eos                                            # [B, K]
    if state.any_done:
        finished &= ~state.done.unsqueeze(1)
    return Candidates(score=score, parent=flat // width, token=token, finished=finished,
                      token_logprob=best_lp.view(batch, k * width).gather(1, flat),   # [B, 2K]
                      row_best=(best_lp, best_token))


def finish(state: BeamState, cands: Candidates, t: int, cfg: DecodeConfig) -> None:
    """Move EOS extensions ranked within the best K into the pool (which keeps the K best)."""
    if not bool(cands.finished.any()):
        return
    k = cands.finished.shape[1]
    top = {"score": cands.score[:, :k], "parent": cands.parent[:, :k], "token": cands.token[:, :k],
           "token_lp": cands.token_logprob[:, :k], "eos": cands.finished,
           "rank": torch.arange(k, device=cands.score.device).expand_as(cands.finished)}
    norm = top["score"] / length_penalty(t + 1, cfg.length_penalty, cfg.alpha)   # [B, K]
    _pool(state, cands.finished, norm, top, t)


def select(state: BeamState, cands: Candidates, eos: int = EOS_ID) -> torch.Tensor:
    """The K best non-EOS extensions become the live hypotheses; returns the row index [B*K] for the cache."""
    batch, k = state.scores.shape
    _, pick = cands.score.masked_fill(cands.token == eos, NEG_INF).topk(k, dim=1)   # [B, K] best first
    parent = cands.parent.gather(1, pick)                                     # [B, K]
    state.tokens = cands.token.gather(1, pick)                                # [B, K]
    state.scores = cands.score.gather(1, pick)                                # [B, K]
    state.history.append((parent, state.tokens, cands.token_logprob.gather(1, pick)))
    state.pick = pick
    offset = torch.arange(0, batch * k, k, device=pick.device).unsqueeze(1)   # [B, 1]
    return (parent + offset).view(-1)                                         # [B*K]


def truncate(state: BeamState, t: int, cfg: DecodeConfig, first_limit: int) -> torch.Tensor | None:
    """Sentences whose live hypotheses reached the length limit pool them (no EOS). Returns [B] or None."""
    if t + 1 < first_limit:
        return None
    at_limit = (t + 1 >= state.limit) & ~state.done                           # [B]
    k = state.scores.shape[1]
    parent, token, token_lp = state.history[-1]
    live = {"score": state.scores, "parent": parent, "token": token, "token_lp": token_lp,
            "eos": torch.zeros_like(at_limit).unsqueeze(1).expand(-1, k), "rank": state.pick}
    norm = state.scores / length_penalty(t + 1, cfg.length_penalty, cfg.alpha)    # [B, K]
    _pool(state, at_limit.unsqueeze(1).expand(-1, k), norm, live, t)
    return at_limit


def stop(state: BeamState, at_limit: torch.Tensor | None, cfg: DecodeConfig) -> bool:
    """Mark sentences done (recording why); True when every sentence is."""
    if not state.pool_full and at_limit is None:
        return False
    full = state.pool_norm[:, -1] > NEG_INF                                   # [B] pool holds K
    if cfg.early_stopping:
        settled, reason = full, STOP_REASONS.index("early_stopping")
    else:
        reachable = state.scores[:, 0] / state.best_lp                        # [B]
        settled, reason = full & (reachable <= state.pool_norm[:, -1]), STOP_REASONS.index("canonical")
    new = ~state.done & (settled if at_limit is None else settled | at_limit)   # [B]
    if not bool(new.any()):
        return False
    state.stop_reason = torch.where(new, torch.where(settled, reason, STOP_REASONS.index("max_len")),
                                    state.stop_reason)
    state.done = state.done | new
    state.any_done = True
    return bool(state.done.all())


def beam_search(model: nn.Module, src, cfg: DecodeConfig | None = None, *, prefix: Sequence[int] | None = None,
                ablate=(), trace: bool = False, use_cache: bool = True,
                given: Sequence[int] | None = None) -> list[Decoded]:
    """n-best hypotheses per source (min(n_best, beam_size), best normalised score first).

    src: LongTensor [B, S] or ragged id lists (EOS included). `prefix` forces the first output
    tokens of every sentence; `ablate` zeroes (kind, layer, head) heads; `trace` adds a BeamTrace;
    `given` tokens come before the prefix and score 0 (core.with_given: a target-language tag).
    """
    cfg = cfg or DecodeConfig()
    check_config(cfg, model, beam=True)
    prefix, n_given = with_given(given, prefix)
    prefix = check_prefix(prefix, model)
    special = special_ids(model)
    k = cfg.beam_size
    with decoding_session(model, ablate):
        src, src_len = as_batch(src, model)                                   # [B, S], [B]
        batch, n_prefix = src.shape[0], len(prefix)
        limit = max_lengths(src_len, cfg, model.cfg.max_len, n_prefix)        # [B]
        step, first = start(model, src, prefix, k, use_cache)                 # [B*K, P+1, V]
        forced_lp = prefix_logprobs(first, prefix, n_given).view(batch, k, -1)[:, 0]   # [B, P]
        state = init_state(batch, k, forced_lp.sum(dim=1), limit, cfg)
        recorder = TraceRecorder(batch, k, cfg, prefix, forced_lp, first, special) if trace else None
        log_probs = first[:, -1].contiguous()                                 # [B*K, V]
        first_limit, longest = int(limit.min()), int(limit.max())
        for t in range(n_prefix, longest):
            log_probs = constrain(log_probs, t, cfg.min_len, special)         # [B*K, V]
            prev_scores, active = state.scores, ~state.done
            cands = expand(state, log_probs, special.eos, cfg.trace_top_k if trace else 0)
            finish(state, cands, t, cfg)
            index = select(state, cands, special.eos)                         # [B*K]
            at_limit = truncate(state, t, cfg, first_limit)                   # [B] or None
            if recorder is not None:
                recorder.record_step(prev_scores, cands, state.pick, at_limit, active)
            if stop(state, at_limit, cfg):
                break
            step.reorder(index)
            log_probs = step.feed(state.tokens.view(-1, 1))[:, -1]            # [B*K, V]
    return _results(state, cfg, prefix, forced_lp, recorder, special.eos)


def _pool(state: BeamState, take: torch.Tensor, norm: torch.Tensor, new: dict[str, torch.Tensor], t: int) -> None:
    """Merge the entries `take` [B, M] into the pool, keeping the K best normalised scores."""
    k = state.pool_norm.shape[1]
    all_norm = torch.cat([state.pool_norm, norm.masked_fill(~take, NEG_INF)], dim=1)   # [B, K+M]
    state.pool_norm, pick = all_norm.topk(k, dim=1)                           # [B, K]
    new = {**new, "step": torch.full_like(new["parent"], t)}
    state.pool = {name: torch.cat([state.pool[name], new[name]], dim=1).gather(1, pick) for name in POOL_FIELDS}
    state.pool_full = bool((state.pool_norm[:, -1] > NEG_INF).any())


def _results(state: BeamState, cfg: DecodeConfig, prefix: list[int], forced_lp: torch.Tensor,
             recorder: TraceRecorder | None, eos: int = EOS_ID) -> list[Decoded]:
    """Follow back-pointers from every pooled hypothesis, all at once (numpy), then build Decoded."""
    batch, k = state.scores.shape
    n = min(cfg.n_best, k)
    pool = {name: value.cpu().numpy() for name, value in state.pool.items()}
    norm = state.pool_norm.cpu().numpy()
    ids, lps = backtrack(state.history, pool, prefix, forced_lp.cpu().numpy())
    reasons = [STOP_REASONS[i] for i in state.stop_reason.tolist()]
    limits = state.limit.tolist()
    out, counts = [], []
    for b in range(batch):
        hyps = [Hypothesis(ids=ids[b][j], token_logprobs=lps[b][j], score=float(pool["score"][b, j]),
                           normalized=float(norm[b, j]), finished=bool(pool["eos"][b, j]), eos_id=eos)
                for j in range(n) if norm[b, j] > NEG_INF]
        counts.append(len(hyps))
        out.append(Decoded(hypotheses=hyps, max_len=int(limits[b]), meta={"stop_reason": reasons[b]}))
    if recorder is not None:
        traces = recorder.build(pool["step"], pool["rank"], counts, reasons, limits)
        out = [Decoded(d.hypotheses, d.max_len, tr, d.meta) for d, tr in zip(out, traces)]
    return out


def backtrack(history, pool: dict[str, np.ndarray], prefix: list[int], forced_lp: np.ndarray):
    """Token ids and log-probs of every pool entry [B][K] -> lists, following parents step by step."""
    n_prefix = len(prefix)
    parents = np.stack([h[0].cpu().numpy() for h in history])                # [T, B, K]
    tokens = np.stack([h[1].cpu().numpy() for h in history])                 # [T, B, K]
    token_lp = np.stack([h[2].cpu().numpy() for h in history])               # [T, B, K]
    step, slot = pool["step"], pool["parent"].copy()                          # [B, K] absolute step, slot
    batch, k = step.shape
    width = int(step.max()) + 1
    out_ids = np.zeros((batch, k, width), dtype=np.int64)                     # [B, K, L]
    out_lp = np.zeros((batch, k, width), dtype=np.float64)                    # [B, K, L]
    rows = np.arange(batch)[:, None]                                          # [B, 1]
    out_ids[rows, np.arange(k), step] = pool["token"]
    out_lp[rows, np.arange(k), step] = pool["token_lp"]
    for pos in range(width - 2, n_prefix - 1, -1):                           # walk back from the newest step
        active = pos < step                                                   # [B, K]
        s = pos - n_prefix
        out_ids[:, :, pos] = np.where(active, tokens[s][rows, slot], out_ids[:, :, pos])
        out_lp[:, :, pos] = np.where(active, token_lp[s][rows, slot], out_lp[:, :, pos])
        slot = np.where(active, parents[s][rows, slot], slot)
    out_ids[:, :, :n_prefix] = prefix
    out_lp[:, :, :n_prefix] = forced_lp[:, None, :]
    lengths = step + 1
    ids = [[out_ids[b, j, :lengths[b, j]].tolist() for j in range(k)] for b in range(batch)]
    lps = [[out_lp[b, j, :lengths[b, j]].tolist() for j in range(k)] for b in range(batch)]
    return ids, lps
