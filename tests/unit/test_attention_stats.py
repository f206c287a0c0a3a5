"""Head statistics and word alignment (explorer.inspection.attention_stats) on hand-built maps."""
import math

import numpy as np
import pytest

from explorer.inspection.attention_stats import (STATS, head_stats, piece_words, stack_stats, stats_rows, word_alignment,
                                      word_text)


def test_identity_map_is_peaked_self_and_diagonal():
    s = head_stats(np.eye(5), eos_index=4)
    assert s["entropy"] == pytest.approx(0.0)
    assert s["max_weight"] == pytest.approx(1.0)
    assert s["to_self"] == pytest.approx(1.0)
    assert s["to_prev"] == pytest.approx(0.0)
    assert s["to_eos"] == pytest.approx(1 / 5)          # only the last row looks at position 4
    assert s["diagonality"] == pytest.approx(1.0)


def test_uniform_map_has_maximal_entropy():
    s = head_stats(np.full((4, 6), 1 / 6), eos_index=-1)
    assert s["entropy"] == pytest.approx(math.log(6))
    assert s["max_weight"] == pytest.approx(1 / 6)
    assert s["to_eos"] == pytest.approx(1 / 6)
    assert 0 < s["diagonality"] < 1


def test_previous_token_head():
    w = np.zeros((5, 5))
    w[0, 0] = 1
    for i in range(1, 5):
        w[i, i - 1] = 1
    s = head_stats(w)
    assert s["to_prev"] == pytest.approx(1.0)
    assert s["to_self"] == pytest.approx(0.2)
    assert math.isnan(s["to_eos"])                       # no boundary key given


def test_diagonality_rescales_for_different_lengths():
    # 3 target rows over 7 source columns, each row on the rescaled diagonal 0, 3, 6
    w = np.zeros((3, 7))
    w[0, 0] = w[1, 3] = w[2, 6] = 1
    assert head_stats(w)["diagonality"] == pytest.approx(1.0)
    anti = w[::-1]                                        # reversed order: far from the diagonal
    assert head_stats(anti)["diagonality"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("q, k", [(7, 3), (3, 7), (1, 4), (4, 1), (1, 1)])
def test_any_shape_works(q, k):
    """Cross-attention is rectangular either way (the output may be longer than the source)."""
    w = np.full((q, k), 1 / k)
    s = head_stats(w, eos_index=k - 1)
    assert s["entropy"] == pytest.approx(math.log(k))
    assert s["to_eos"] == pytest.approx(1 / k)
    assert math.isnan(s["to_prev"]) == (q == 1)
    if q > 1:
        assert s["to_prev"] == pytest.approx(1 / k)
    assert 0 < s["diagonality"] <= 1


def test_stack_stats_shapes_and_rows():
    rng = np.random.default_rng(0)
    raw = rng.random((2, 3, 4, 5))
    w = raw / raw.sum(-1, keepdims=True)
    stats = stack_stats(w, eos_index=4)
    assert set(stats) == set(STATS)
    assert all(v.shape == (2, 3) for v in stats.values())
    assert stats["entropy"][1, 2] == pytest.approx(head_stats(w[1, 2], 4)["entropy"])
    rows = stats_rows(stats)
    assert len(rows) == 6 and rows[0]["layer"] == 1 and rows[-1]["head"] == 3


def test_bad_shapes_raise():
    with pytest.raises(ValueError):
        head_stats(np.ones((2, 2, 2)))
    with pytest.raises(ValueError):
        stack_stats(np.ones((2, 2)))
    with pytest.raises(ValueError):
        head_stats(np.ones((3, 0)))


def test_piece_words_groups_sentencepiece():
    pieces = ["▁un", "ig", "én", "ito", "▁Dios", ".", "</s>"]
    assert piece_words(pieces) == [[0, 1, 2, 3], [4, 5], [6]]
    assert word_text(pieces, [0, 1, 2, 3]) == "unigénito"
    assert piece_words(["abc", "▁d", "<unk>", "x"]) == [[0], [1], [2], [3]]


def test_word_alignment_crossing_and_mass():
    src = ["▁twenty", "▁one", "</s>"]
    out = ["▁ein", "▁und", "▁zwanzig", "</s>"]
    cross = np.array([[0.1, 0.8, 0.1],            # ein -> one
                      [0.3, 0.3, 0.4],
                      [0.9, 0.05, 0.05],          # zwanzig -> twenty
                      [0.0, 0.0, 1.0]])
    a = word_alignment(cross, src, out)
    assert a.src_words == ["twenty", "one"] and a.tgt_words == ["ein", "und", "zwanzig"]
    assert a.matrix.shape == (3, 2)
    assert a.links[0] == (0, 1) and a.links[2] == (2, 0)     # crossing alignment
    assert a.matrix[1].sum() == pytest.approx(0.6)           # 0.4 went to </s>
    full = word_alignment(cross, src, out, drop_special=False)
    assert full.matrix.shape == (4, 3)
    assert np.allclose(full.matrix.sum(1), 1.0)


def test_word_alignment_merges_pieces():
    src = ["▁un", "ig", "▁Dios", "</s>"]
    out = ["▁only", "▁God", "</s>"]
    cross = np.array([[0.3, 0.5, 0.1, 0.1],
                      [0.0, 0.1, 0.8, 0.1],
                      [0.0, 0.0, 0.0, 1.0]])
    a = word_alignment(cross, src, out)
    assert a.src_words == ["unig", "Dios"]
    assert a.matrix[0, 0] == pytest.approx(0.8)              # pieces' columns summed
    assert a.links == [(0, 0), (1, 1)]
    with pytest.raises(ValueError):
        word_alignment(cross[:, :3], src, out)


def test_a_target_word_of_several_pieces_is_the_mean_of_its_rows():
    """A target word's row is the mean of its pieces' rows, so it stays a distribution: "begot" + "ten" read
    0.6/0.4 and 0.2/0.8 over the two source words, so the word reads 0.4/0.6 (a sum would read 0.8/1.2)."""
    src = ["▁unigénito", "▁Hijo", "</s>"]
    out = ["▁begot", "ten", "▁Son", "</s>"]
    cross = np.array([[0.6, 0.4, 0.0],
                      [0.2, 0.8, 0.0],
                      [0.0, 0.9, 0.1],
                      [0.0, 0.0, 1.0]])
    a = word_alignment(cross, src, out)
    assert a.tgt_words == ["begotten", "Son"]
    assert np.allclose(a.matrix, [[0.4, 0.6], [0.0, 0.9]])
    assert np.allclose(word_alignment(cross, src, out, drop_special=False).matrix.sum(1), 1.0)
