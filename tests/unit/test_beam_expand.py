"""beam.expand ranks the same 2K pairs as one top-k over all K x V cumulative sums would."""
from __future__ import annotations

import torch

from explorer.config import DecodeConfig
from explorer.decoding.beam import expand, init_state

NEG_INF = float("-inf")


def _state(scores: torch.Tensor):
    batch, k = scores.shape
    state = init_state(batch, k, torch.zeros(batch), torch.full((batch,), 10), DecodeConfig(beam_size=k))
    state.scores = scores
    return state


def _reference(scores: torch.Tensor, log_probs: torch.Tensor):
    """The 2K best pairs by a stable sort of every K x V sum: (score, parent, token, token log-prob)."""
    batch, k = scores.shape
    vocab = log_probs.shape[1]
    total = (scores.unsqueeze(2) + log_probs.view(batch, k, vocab)).view(batch, -1)   # [B, K*V]
    score, flat = total.sort(dim=1, descending=True, stable=True)
    flat = flat[:, :2 * k]
    return score[:, :2 * k], flat // vocab, flat % vocab, log_probs.view(batch, -1).gather(1, flat)


def test_expand_equals_a_top_k_over_every_sum():
    torch.manual_seed(0)
    batch, k, vocab = 3, 4, 50
    scores = -torch.rand(batch, k) * 5                                        # [B, K]
    scores[0, 1:] = NEG_INF                                                   # a first step: one live slot
    log_probs = torch.log_softmax(torch.randn(batch * k, vocab), dim=-1)      # [B*K, V]
    log_probs[:, 0] = NEG_INF                                                 # banned ids
    for width in (0, 5, 2 * k + 3):
        cands = expand(_state(scores), log_probs, eos=3, width=width)
        score, parent, token, token_lp = _reference(scores, log_probs)
        assert torch.equal(cands.score, score) and torch.equal(cands.parent, parent)
        assert torch.equal(cands.token, token) and torch.equal(cands.token_logprob, token_lp)
        assert torch.equal(cands.finished, token[:, :k] == 3)
        values, indices = cands.row_best                                      # the trace's alternatives
        assert values.shape[1] >= max(width, 2 * k)
        torch.testing.assert_close(values[:, :5], log_probs.topk(5, dim=1).values, atol=0, rtol=0)


def test_expand_ranks_equal_sums_lower_slot_first():
    scores = torch.tensor([[-1.0, -1.0]])                                     # two live slots, same score
    log_probs = torch.log_softmax(torch.arange(8.0), dim=0).repeat(2, 1)      # [2, V], the same rows
    cands = expand(_state(scores), log_probs)
    assert cands.parent[0].tolist() == [0, 1, 0, 1]
    assert cands.token[0].tolist() == [7, 7, 6, 6]
