"""The faithfulness scorecard measures what it says: an edited source is scored as a plain teacher-forced
pass on it would score it; keeping every token leaves the log-prob unchanged (sufficiency 0) and removing
every token is the same edit whatever the ranking; the ranking that knows each token's own removal drop
is never beaten at one token; EOS is never removed; random rankings are seeded."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.studies.contributions.faithfulness import (METHODS, FaithfulnessSettings, edited, erasure_measures,
                                                 forced_logprobs, interval, method_scores, random_scores,
                                                 sentence_faithfulness, top_k)
from explorer.decoding.teacher import score_targets
from support.model_helpers import make_model
from support.numerics import model_atol

SRC, OUT = [5, 9, 12, 7, 30, 3], [11, 4, 17, 8, 3]
UNK = 1


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return make_model()


def test_an_edited_source_scores_as_a_plain_teacher_forced_pass_on_it(model):
    source = edited(SRC, [1, 3], keep=False, unk=UNK)
    assert source == (5, UNK, 12, UNK, 30, 3)
    batched = forced_logprobs(model, [source] * len(OUT), OUT, list(range(len(OUT))), batch_rows=2)
    plain = score_targets(model, [list(source)], [OUT])[0].token_logprobs
    np.testing.assert_allclose(batched, plain, rtol=0, atol=model_atol(model, plain))   # other batch shapes


def test_edits_keep_eos_and_top_k_picks_the_highest(model):
    assert edited(SRC, [0], keep=True, unk=UNK) == (5, UNK, UNK, UNK, UNK, 3)
    assert edited(SRC, list(range(5)), keep=False, unk=UNK) == (UNK,) * 5 + (3,)
    row = np.array([0.1, 0.9, 0.5, 0.9, 0.0, 100.0])             # the last one is EOS: never a candidate
    assert top_k(row, 5, 0.2) == [1] and top_k(row, 5, 0.5) == [1, 2, 3] and top_k(row, 5, 0.01) == [1]


def test_all_kept_is_no_change_and_all_removed_is_one_edit_for_every_ranking(model):
    rankings = {"a": random_scores(SRC, len(OUT), 0), "b": random_scores(SRC, len(OUT), 1),
                "alti": method_scores(model, SRC, OUT, ("alti",), 2)["alti"]}
    m = erasure_measures(model, SRC, OUT, rankings, fractions=(1.0,))
    # each measure is a difference of two log-probs from other batch rows: within twice model_atol
    atol = 2 * model_atol(model, [-1.0])
    for name in rankings:
        assert np.abs(m[name]["sufficiency"]).max() < atol
        np.testing.assert_allclose(m[name]["comprehensiveness"], m["a"]["comprehensiveness"], rtol=0, atol=atol)
    assert np.abs(m["a"]["comprehensiveness"]).max() > 10 * atol                 # the edit changes something


def test_the_ranking_that_knows_each_removal_is_never_beaten_at_one_token(model):
    n = len(SRC) - 1
    single = [forced_logprobs(model, [edited(SRC, [j], False, UNK)] * len(OUT), OUT, list(range(len(OUT))), 8)
              for j in range(n)]
    full = forced_logprobs(model, [tuple(SRC)] * len(OUT), OUT, list(range(len(OUT))), 8)
    oracle = np.array([[full[t] - single[j][t] for j in range(n)] + [0.0] for t in range(len(OUT))])   # [T, S]
    rankings = {"oracle": oracle, "anti": -oracle, **{f"r{s}": random_scores(SRC, len(OUT), s) for s in range(3)}}
    m = erasure_measures(model, SRC, OUT, rankings, fractions=(0.2,))            # one token of five
    best = m["oracle"]["comprehensiveness"]
    np.testing.assert_allclose(best[0], oracle[:, :n].max(axis=1), rtol=0, atol=2 * model_atol(model, oracle))
    for name in rankings:
        assert (m[name]["comprehensiveness"] <= best + 1e-6).all(), name
    assert (m["anti"]["comprehensiveness"] < best - 1e-6).any()


def test_every_method_scores_every_pair_and_random_rankings_are_seeded(model):
    settings = FaithfulnessSettings(seeds=2, ig_steps=2, fractions=(0.2, 0.5))
    result = sentence_faithfulness(model, SRC, OUT, settings)
    assert set(result) == set(METHODS) | {"random-0", "random-1"}
    for measures in result.values():
        assert measures["comprehensiveness"].shape == measures["sufficiency"].shape == (2, len(OUT))
        assert np.isfinite(measures["comprehensiveness"]).all()
    assert np.array_equal(random_scores(SRC, 5, 0), random_scores(SRC, 5, 0))
    assert not np.array_equal(random_scores(SRC, 5, 0), random_scores(SRC, 5, 1))
    assert not np.array_equal(random_scores(SRC, 5, 0), random_scores(SRC[::-1], 5, 0))


def test_intervals_and_settings():
    assert interval(np.full(7, 0.25)) == (0.25, 0.25, 0.25)
    mean, low, high = interval(np.arange(100.0))
    assert low < mean < high and mean == 49.5
    for bad in (dict(methods=("lime",)), dict(fractions=(0.0,)), dict(seeds=0), dict(ig_steps=1000)):
        with pytest.raises(ValueError):
            FaithfulnessSettings(**bad)


def test_worker_processes_give_the_numbers_of_one_process(model):
    from explorer.runtime.forked import imap

    settings = FaithfulnessSettings(methods=("alti", "integrated-gradients"), seeds=1, ig_steps=2, fractions=(0.5,))
    items = [(model, SRC, OUT, settings), (model, SRC[::-1][1:] + [3], OUT[:3] + [3], settings)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)                                       # as each worker runs
    try:
        alone = [r for _, r in imap(sentence_faithfulness, items, workers=1)]
    finally:
        torch.set_num_threads(before)
    forked = [r for _, r in imap(sentence_faithfulness, items, workers=2)]
    assert len(forked) == 2 and forked[1]["alti"]["sufficiency"].shape == (1, 4)
    for a, b in zip(alone, forked):
        for name in a:
            for measure in ("comprehensiveness", "sufficiency"):
                assert np.array_equal(a[name][measure], b[name][measure]), (name, measure)
