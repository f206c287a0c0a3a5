"""explorer.studies.heads statistics and roles on hand-made attention patterns, and over a tiny model."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from explorer.studies.heads.roles import RULES, UNLABELLED, label_heads, matches
from explorer.studies.common.sentences import SentenceSet, rarest_key
from explorer.studies.heads.stats import HEAD_STATS, head_statistics, stats_from_maps, summarize
from explorer.inspection.attention_stats import boundary_key, key_share, offset_share

K = 6


def previous_token(k: int = K) -> np.ndarray:
    w = np.zeros((k, k))
    w[0, 0] = 1.0
    w[np.arange(1, k), np.arange(k - 1)] = 1.0                                # [q, k]
    return w


def next_token(k: int = K) -> np.ndarray:
    w = np.zeros((k, k))
    w[np.arange(k - 1), np.arange(1, k)] = 1.0
    w[k - 1, k - 1] = 1.0
    return w


def uniform(k: int = K) -> np.ndarray:
    return np.full((k, k), 1.0 / k)


def on_key(key: int, k: int = K) -> np.ndarray:
    w = np.zeros((k, k))
    w[:, key] = 1.0
    return w


def one_layer(*heads: np.ndarray) -> np.ndarray:
    return np.stack(heads)[None]                                               # [1, H, q, k]


def test_shares_of_hand_made_maps():
    assert offset_share(previous_token(), -1) == pytest.approx(1.0)
    assert offset_share(previous_token(), 1) == pytest.approx(0.0)
    assert offset_share(next_token(), 1) == pytest.approx(1.0)
    assert offset_share(np.eye(K), 0) == pytest.approx(1.0)
    assert key_share(on_key(K - 1), K - 1) == pytest.approx(1.0)
    assert key_share(uniform(), 2) == pytest.approx(1 / K)
    assert np.isnan(key_share(uniform(), None))
    assert boundary_key("src", [5, 6, 2], eos_id=2) == 2
    assert boundary_key("src", [5, 6, 7], eos_id=2) is None
    assert boundary_key("tgt", [5, 6, 2], eos_id=2) == 0


def test_statistics_and_labels_of_hand_made_heads():
    maps = [{"encoder": one_layer(previous_token(), next_token(), uniform(), on_key(K - 1), on_key(2), np.eye(K))}]
    stats = stats_from_maps(maps, [{"encoder": K - 1}], [{"encoder": 2}])
    mean = stats["encoder"].mean
    assert mean["to_prev"][0, 0] == pytest.approx(1.0)
    assert mean["confidence"][0, 2] == pytest.approx(1 / K)
    assert mean["entropy"][0, 2] == pytest.approx(np.log(K))
    assert mean["spread"][0, 2] == pytest.approx(1.0)
    assert mean["to_eos"][0, 3] == pytest.approx(1.0)
    assert mean["to_rare"][0, 4] == pytest.approx(1.0)
    roles = [label.role for label in label_heads(stats)]
    assert roles == ["positional-previous", "positional-next", "broad", "end-of-sentence sink", "rare-word", "self"]
    first = label_heads(stats)[0]
    assert first.rule == "to_prev > 0.5" and first.value == pytest.approx(1.0) and (first.layer, first.head) == (0, 0)


def test_cross_attention_along_the_diagonal_is_alignment_and_decoder_never_positional_next():
    cross = stats_from_maps([{"cross": one_layer(np.eye(K))}], [{"cross": None}], [{"cross": None}])
    assert label_heads(cross)[0].role == "alignment"
    figures = {name: 0.0 for name in HEAD_STATS} | {"to_next": 1.0}
    assert matches("decoder", figures) == []
    assert [r for r, _, _ in matches("encoder", figures)] == ["positional-next"]
    assert all(rule.above is not None or rule.below is not None for rule in RULES)


def test_a_head_with_no_role_is_unlabelled():
    w = 0.35 * previous_token() + 0.35 * np.eye(K) + 0.3 * uniform()          # some previous, some self
    stats = stats_from_maps([{"encoder": one_layer(w)}], [{"encoder": None}], [{"encoder": None}])
    assert label_heads(stats)[0].role == UNLABELLED


def test_spread_is_the_standard_deviation_across_sentences_and_nan_is_left_out():
    values = np.array([[[1.0]], [[0.0]], [[np.nan]]])                          # [N=3, L=1, H=1]
    ks = summarize({"to_prev": values})
    assert ks.mean["to_prev"][0, 0] == pytest.approx(0.5)
    assert ks.std["to_prev"][0, 0] == pytest.approx(0.5)
    assert np.isnan(summarize({"to_eos": np.full((2, 1, 1), np.nan)}).mean["to_eos"][0, 0])


def test_rarest_key_skips_special_ids_and_takes_the_first_on_ties():
    counts = Counter({5: 10, 6: 3, 7: 3})
    assert rarest_key([5, 6, 7, 2], counts, skip={2}) == 1
    assert rarest_key([5, 9, 2], counts, skip={2}) == 1                         # unseen: count 0
    assert rarest_key([2], counts, skip={2}) is None


def test_statistics_over_a_tiny_model(model):
    sents = SentenceSet(src=[[5, 6, 7, 2], [8, 9, 2]], out=[[10, 11, 2], [12, 2]], refs=["", ""], forced="reference")
    counts = {"src": Counter({5: 1}), "tgt": Counter()}
    stats = head_statistics(model, sents, counts, batch_size=1)
    ticks = []
    head_statistics(model, sents, counts, batch_size=1, tick=lambda done: ticks.append(done))
    assert ticks == [1, 2]
    for kind, ks in stats.items():
        assert ks.shape == (2, model.cfg.n_heads)
        assert ks.per_sentence["confidence"].shape == (2, 2, model.cfg.n_heads)
        assert np.all((ks.mean["confidence"] > 0) & (ks.mean["confidence"] <= 1 + 1e-6))
    assert np.all(stats["decoder"].mean["to_next"] == 0)                       # causal: never the next token
    assert np.allclose(stats["decoder"].mean["to_eos"][:, :], stats["decoder"].per_sentence["to_eos"].mean(0))
