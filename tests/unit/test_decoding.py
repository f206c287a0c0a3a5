"""Search behaviour: greedy, beam, cache, forcing, ablation, sampling, scoring (tiny models, CPU)."""
from __future__ import annotations

import pytest
import torch

from support.decoding_helpers import random_model, sources, trained  # noqa: F401 (fixtures)
from explorer.config import DecodeConfig
from explorer.decoding import (EOS_ID, beam_search, decode, decode_batch, greedy_search, sample, score_targets)
from explorer.decoding.greedy import filter_logits
from explorer.inspection.hooks import capture_points
from explorer.model.layers import CapturePoint
from support.numerics import float32_atol, model_atol, score_atol

torch.set_num_threads(1)

# Two searches that compute the same log-probabilities with other batch shapes (beam against greedy,
# cached against not, a batch against one sentence) add in other orders: a token's log-probability is
# compared within model_atol, a score within score_atol (support.numerics). A wrong cache or mask moves them
# by far more, and changes the ids, which are compared exactly.


def same_logprobs(got, want, model):
    assert got == pytest.approx(want, abs=model_atol(model, want))


def ids(results):
    return [d.best.ids for d in results]


def test_trained_model_mostly_reverses(trained, sources):
    out = decode_batch(trained, sources, DecodeConfig(strategy="greedy"))
    assert sum(o == s[:-1][::-1] for o, s in zip(out, sources)) >= len(sources) // 3


@pytest.mark.parametrize("which", ["trained", "random"])
def test_beam_size_1_equals_greedy(which, trained, sources):
    model = trained if which == "trained" else random_model(3)
    greedy = greedy_search(model, sources, DecodeConfig(strategy="greedy", max_len_b=12))
    for cfg in (DecodeConfig(beam_size=1, n_best=1, max_len_b=12, length_penalty="none"),
                DecodeConfig(beam_size=1, n_best=1, max_len_b=12, length_penalty="gnmt", early_stopping=True)):
        beam = beam_search(model, sources, cfg)
        assert ids(beam) == ids(greedy)
        for b, g in zip(beam, greedy):
            same_logprobs(b.best.token_logprobs, g.best.token_logprobs, model)


def test_beam_score_at_least_greedy_without_length_penalty(trained, sources):
    greedy = greedy_search(trained, sources, DecodeConfig(strategy="greedy"))
    beam = beam_search(trained, sources, DecodeConfig(beam_size=4, length_penalty="none"))
    for b, g in zip(beam, greedy):
        assert b.best.score >= g.best.score - score_atol(trained, g.best.token_logprobs)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_cached_equals_uncached(strategy, trained, sources):
    for model in (trained, random_model(1)):
        cfg = DecodeConfig(strategy=strategy, beam_size=3, max_len_b=10)
        cached = decode(model, sources[:8], cfg, use_cache=True)
        uncached = decode(model, sources[:8], cfg, use_cache=False)
        for c, u in zip(cached, uncached):
            assert [h.ids for h in c.hypotheses] == [h.ids for h in u.hypotheses]
            for hc, hu in zip(c.hypotheses, u.hypotheses):
                same_logprobs(hc.token_logprobs, hu.token_logprobs, model)


def test_batched_equals_one_by_one(trained, sources):
    cfg = DecodeConfig(beam_size=3, length_penalty="average")
    together = beam_search(trained, sources[:6], cfg)
    alone = [beam_search(trained, [s], cfg)[0] for s in sources[:6]]
    for t, a in zip(together, alone):
        assert [h.ids for h in t.hypotheses] == [h.ids for h in a.hypotheses]
        for ht, ha in zip(t.hypotheses, a.hypotheses):
            assert ht.score == pytest.approx(ha.score, abs=score_atol(trained, ha.token_logprobs))


def test_n_best_sorted_distinct_and_scored(trained, sources):
    cfg = DecodeConfig(beam_size=4, n_best=3)
    for d in beam_search(trained, sources[:6], cfg):
        hyps = d.hypotheses
        assert len(hyps) == 3
        assert [h.normalized for h in hyps] == sorted((h.normalized for h in hyps), reverse=True)
        assert len({tuple(h.ids) for h in hyps}) == 3
        for h in hyps:       # the search's float32 running sum against Python's: terms within the score
            assert h.score == pytest.approx(sum(h.token_logprobs), abs=float32_atol(abs(h.score), len(h.ids)))
            assert h.finished == (h.ids[-1] == EOS_ID)
            assert EOS_ID not in h.ids[:-1]
    assert len(beam_search(trained, sources[:1], DecodeConfig(beam_size=2, n_best=5))[0].hypotheses) == 2


def test_teacher_forced_score_matches_search(trained, sources):
    results = beam_search(trained, sources[:5], DecodeConfig(beam_size=3, length_penalty="gnmt"))
    scored = score_targets(trained, sources[:5], [d.best.ids for d in results], DecodeConfig(length_penalty="gnmt"))
    for d, s in zip(results, scored):
        assert s.ids == d.best.ids
        same_logprobs(s.token_logprobs, d.best.token_logprobs, trained)      # all positions at once vs step by step
        assert s.normalized == pytest.approx(d.best.normalized, abs=score_atol(trained, d.best.token_logprobs))
    reference = score_targets(trained, sources[:1], [sources[0][:-1][::-1]])[0]
    assert reference.ids[-1] == EOS_ID and len(reference.token_logprobs) == len(sources[0])


def test_max_length_rule_and_min_len():
    model = random_model(2)
    src = [[5, 6, 7, EOS_ID], [5, EOS_ID]]
    cfg = DecodeConfig(strategy="greedy", max_len_a=2.0, max_len_b=1, min_len=40)
    out = greedy_search(model, src, cfg)
    assert [d.max_len for d in out] == [9, 5]
    assert [len(d.best.ids) for d in out] == [9, 5] and not any(d.best.finished for d in out)
    capped = greedy_search(model, src, DecodeConfig(strategy="greedy", max_len_b=1000, min_len=1000))
    assert capped[0].max_len == model.cfg.max_len
    beam = beam_search(model, src, DecodeConfig(beam_size=2, max_len_a=0, max_len_b=7, min_len=7))
    assert all(len(h.ids) == 7 and EOS_ID not in h.ids for d in beam for h in d.hypotheses)
    assert beam[0].meta["stop_reason"] == "max_len"


def test_early_stopping_stops_no_later(trained, sources):
    for src in sources[:6]:
        early = beam_search(trained, [src], DecodeConfig(beam_size=3, early_stopping=True), trace=True)[0]
        full = beam_search(trained, [src], DecodeConfig(beam_size=3), trace=True)[0]
        assert early.trace.n_steps <= full.trace.n_steps
        assert early.best.normalized <= full.best.normalized + score_atol(trained, full.best.token_logprobs)


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_forced_prefix_is_kept(strategy, trained, sources):
    prefix = [9, 4, 4]
    cfg = DecodeConfig(strategy=strategy, beam_size=3)
    for d in decode(trained, sources[:4], cfg, prefix=prefix):
        for h in d.hypotheses:
            assert h.ids[:3] == prefix
    free = decode(trained, sources[:1], DecodeConfig(strategy="greedy"))[0].best
    forced = decode(trained, sources[:1], DecodeConfig(strategy="greedy"), prefix=free.ids[:2])[0].best
    assert forced.ids == free.ids                     # forcing the model's own choices changes nothing
    same_logprobs(forced.token_logprobs, free.token_logprobs, trained)


def test_ablation_changes_output_and_nothing_changes_nothing(trained, sources):
    cfg = DecodeConfig(beam_size=3)
    base = beam_search(trained, sources[:8], cfg)
    assert ids(beam_search(trained, sources[:8], cfg, ablate=[])) == ids(base)
    heads = [("cross", 1, h) for h in range(trained.cfg.n_heads)]
    ablated = beam_search(trained, sources[:8], cfg, ablate=heads)
    assert ids(ablated) != ids(base)
    enc = beam_search(trained, sources[:8], cfg, ablate=[("encoder", 0, h) for h in range(4)])
    assert [d.best.score for d in enc] != pytest.approx([d.best.score for d in base])
    modules = dict(trained.named_modules())
    assert not any(modules[n]._forward_hooks for n in capture_points(trained))
    assert ids(beam_search(trained, sources[:8], cfg)) == ids(base)


def test_sampling_is_seeded_and_filters_work(trained, sources):
    model = random_model(4)
    cfg = DecodeConfig(strategy="sample", seed=11, max_len_b=8)
    assert ids(sample(model, sources[:6], cfg)) == ids(sample(model, sources[:6], cfg))
    other = [ids(sample(model, sources[:6], DecodeConfig(strategy="sample", seed=s, max_len_b=8))) for s in range(3)]
    assert len({str(o) for o in other}) > 1
    state = torch.get_rng_state()
    sample(model, sources[:2], cfg)
    assert torch.equal(state, torch.get_rng_state())
    top1 = sample(trained, sources[:6], DecodeConfig(strategy="sample", top_k=1, temperature=3.0))
    assert ids(top1) == ids(greedy_search(trained, sources[:6]))
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isfinite(filter_logits(logits, top_k=2)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.7)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.5)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.01)).tolist() == [[True, False, False, False]]


def test_model_mode_restored(trained, sources):
    trained.train()
    try:
        a = greedy_search(trained, sources[:2])
        assert trained.training
    finally:
        trained.eval()
    assert ids(a) == ids(greedy_search(trained, sources[:2]))
