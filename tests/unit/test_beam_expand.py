"""beam.expand ranks the same 2K pairs as one top-k over all K x V cumulative sums would; its per-row
top-k (beam.row_topk) returns torch.topk's values and ids."""
from __future__ import annotations

import torch

from explorer.config import DecodeConfig
from explorer.decoding.beam import TOPK_BLOCK, expand, init_state, row_topk

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


def test_row_topk_equals_torch_topk_on_long_rows():
    """The block-maximum shortcut returns what torch.topk returns, ids included: distinct values,
    ties (inside the best k, at the k-th place, across blocks), -inf runs, NaN, a row ending in a
    partial block or not, and rows too short for the shortcut."""
    torch.manual_seed(0)
    for vocab in (58101, 200 * TOPK_BLOCK, 7 * TOPK_BLOCK + 3):
        rows = torch.log_softmax(torch.randn(6, vocab), dim=-1)             # [N, V]
        best = rows.topk(12, dim=1).indices                                  # [N, 12]
        rows[1, best[1, 3]] = rows[1, best[1, 2]]                            # a tie inside the best k
        rows[2, best[2, 9]] = rows[2, best[2, 10]]                           # a tie at the k-th place (k = 10)
        rows[3, (best[3, 0] + 5 * TOPK_BLOCK) % vocab] = rows[3, best[3, 0]]   # the best value twice, blocks apart
        rows[4, : vocab // 2] = NEG_INF                                      # banned ids
        rows[5, :] = NEG_INF
        rows[5, 17] = 0.0                                                    # fewer finite values than k
        for k in (1, 2, 10, 11, 25):
            for batch in [rows] + [rows[i:i + 1] for i in range(rows.shape[0])]:    # together and one by one
                got, expected = row_topk(batch, k), batch.topk(k, dim=1)
                assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1]), (vocab, k)
    with_nan = torch.randn(2, 58101)
    with_nan[0, 40000] = float("nan")
    got, expected = row_topk(with_nan, 10), with_nan.topk(10, dim=1)
    assert torch.equal(got[1], expected[1])
    assert torch.equal(got[0][1], expected[0][1]) and bool(got[0][0, 0].isnan())


def test_row_topk_takes_its_shortcut_on_distinct_values(monkeypatch):
    """Distinct values: no top-k over a whole row (the shortcut is taken, not the fallback)."""
    rows = torch.log_softmax(torch.randn(5, 58101, generator=torch.Generator().manual_seed(2)), dim=-1)
    expected = rows.topk(10, dim=1)
    widths = []
    topk = torch.Tensor.topk

    def recording(self, *args, **kwargs):
        widths.append(self.shape[-1])
        return topk(self, *args, **kwargs)
    monkeypatch.setattr(torch.Tensor, "topk", recording)
    got = row_topk(rows, 10)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert widths and max(widths) < rows.shape[1] // 4


def test_expand_on_a_long_vocabulary_equals_a_top_k_over_every_sum():
    torch.manual_seed(1)
    batch, k, vocab = 2, 5, 58101
    scores = -torch.rand(batch, k) * 5                                        # [B, K]
    log_probs = torch.log_softmax(torch.randn(batch * k, vocab), dim=-1)      # [B*K, V]
    for width in (0, 5, 2 * k + 3):
        cands = expand(_state(scores), log_probs, eos=0, width=width)
        score, parent, token, token_lp = _reference(scores, log_probs)
        assert torch.equal(cands.score, score) and torch.equal(cands.parent, parent)
        assert torch.equal(cands.token, token) and torch.equal(cands.token_logprob, token_lp)
