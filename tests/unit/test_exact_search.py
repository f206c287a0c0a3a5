"""Exact search (depth-first branch-and-bound): never below any beam, equal to enumerating every output
where the space is small enough to list, honest about its budget."""
from __future__ import annotations

import itertools

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.studies.contrastive.exact import exact_search
from explorer.decoding.beam import beam_search
from explorer.decoding.core import constrain, special_ids
from support.model_helpers import make_model
from support.numerics import score_atol

torch.set_num_threads(1)
BEAMS = (1, 2, 4, 8, 16)


def peaked(model, factor: float):
    """A random model whose output logits are `factor` times sharper: outputs of several tokens, as a
    trained model writes, instead of the near-uniform guesses that make the empty output win at once."""
    norm = model.decoder.layers[-1].ffn_block.norm                 # post-LN: the decoder's last operation
    with torch.no_grad():
        norm.weight.mul_(factor)
        norm.bias.mul_(factor)
    return model


def sources(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab, (int(torch.randint(2, 7, (1,), generator=gen)),), generator=gen).tolist() + [3]
            for _ in range(n)]


def enumerate_best(model, src: list[int], cfg: DecodeConfig) -> tuple[float, list[int], dict[tuple, float]]:
    """Every output the beam search's space holds (EOS-ended up to the limit, or cut at the limit),
    scored by one teacher-forced forward per length: the plain second implementation. The best score, its
    output, and every output's score."""
    special = special_ids(model)
    limit = int(cfg.max_len_b)
    allowed = [t for t in range(model.cfg.tgt_vocab_size) if t not in special.never_output and t != special.eos]
    best = (float("-inf"), [])
    every: dict[tuple, float] = {}
    srct = torch.tensor([src])
    with torch.no_grad():
        for length in range(0, limit + 1):
            outs = [list(p) + [special.eos] for p in itertools.product(allowed, repeat=length)] if length < limit else []
            outs += [list(p) for p in itertools.product(allowed, repeat=limit)] if length == limit else []
            if not outs:
                continue
            tgt = torch.tensor(outs)                                              # [N, L]
            tgt_in = torch.cat([torch.full_like(tgt[:, :1], special.start), tgt[:, :-1]], dim=1)
            lp = model(srct.expand(len(outs), -1), tgt_in)                        # [N, L, V]
            for pos in range(lp.shape[1]):
                lp[:, pos] = constrain(lp[:, pos].clone(), pos, cfg.min_len, special)
            scores = lp.gather(2, tgt.unsqueeze(2)).squeeze(2).sum(1)             # [N]
            every.update(zip(map(tuple, outs), scores.tolist()))
            i = int(scores.argmax())
            if float(scores[i]) > best[0]:
                best = (float(scores[i]), outs[i])
    return (*best, every)


@pytest.mark.parametrize("factor,max_len_a,max_len_b", [(1.0, 0.0, 3), (1.5, 1.0, 4)])
def test_exact_scores_at_least_every_beam_on_every_sentence(factor, max_len_a, max_len_b):
    """factor 1: a near-uniform random model, whose best output is the empty one; 1.5: outputs of
    several tokens where small beams make search errors (asserted, so the comparison has teeth)."""
    model = peaked(make_model(), factor)
    cfg = DecodeConfig(length_penalty="none", max_len_a=max_len_a, max_len_b=max_len_b)
    errors = 0
    for src in sources(4, 40):
        beams = {k: beam_search(model, [src], DecodeConfig(**{**cfg.to_dict(), "beam_size": k, "n_best": 1}))[0].best
                 for k in BEAMS}
        widest = max(beams.values(), key=lambda h: h.score)
        exact = exact_search(model, src, cfg, initial=widest, max_nodes=20_000)
        assert exact.proven
        for k, hyp in beams.items():     # scores from other batch shapes: within score_atol (support.numerics)
            assert exact.score >= hyp.score - score_atol(model, hyp.token_logprobs), (k, src)
        errors += beams[1].score < exact.score - 1e-3
        if factor > 1:             # from scratch (no beam to start the bound) it finds the same score
            cold = exact_search(model, src, cfg, max_nodes=20_000)
            within = score_atol(model, [exact.score] * len(exact.ids))   # each token's log-prob is within the score
            assert cold.proven and cold.score == pytest.approx(exact.score, abs=within)
    assert errors >= 1


@pytest.mark.parametrize("seed,factor,min_len", [(0, 1.5, 0), (1, 3.0, 0), (2, 1.5, 2)])
def test_exact_equals_exhaustive_enumeration_of_a_small_space(seed, factor, min_len):
    model = peaked(make_model(seed, src_vocab_size=10, tgt_vocab_size=10), factor)
    cfg = DecodeConfig(length_penalty="none", max_len_a=0.0, max_len_b=4, min_len=min_len)
    for src in sources(2, 10, seed):
        score, ids, every = enumerate_best(model, src, cfg)
        exact = exact_search(model, src, cfg)
        assert exact.proven
        close = pytest.approx(score, abs=score_atol(model, [score] * len(ids)))    # other batch shapes
        assert exact.score == close
        # its output is one the space holds (an EOS-ended or a full-length one), scoring the best: the
        # enumeration's own, or one tied with it within the batch shapes' tolerance
        assert tuple(exact.ids) in every and every[tuple(exact.ids)] == close, (exact.ids, ids)
        assert len(exact.output_ids) >= min_len


def test_exact_with_a_length_penalty_beats_the_beam_by_its_objective():
    model = peaked(make_model(3), 1.5)
    cfg = DecodeConfig(length_penalty="gnmt", alpha=1.0, max_len_a=0.0, max_len_b=4)
    for src in sources(3, 40, 3):
        beam = beam_search(model, [src], DecodeConfig(**{**cfg.to_dict(), "beam_size": 4, "n_best": 1}))[0].best
        exact = exact_search(model, src, cfg, initial=beam, max_nodes=50_000)
        assert exact.proven and exact.normalized >= beam.normalized - 1e-4


def test_a_budget_stops_the_search_unproven_never_worse_than_its_start():
    model = make_model(4)
    cfg = DecodeConfig(length_penalty="none", max_len_a=0.0, max_len_b=12, min_len=10)   # a huge space
    src = sources(1, 40, 4)[0]
    beam = beam_search(model, [src], DecodeConfig(**{**cfg.to_dict(), "beam_size": 2, "n_best": 1}))[0].best
    out = exact_search(model, src, cfg, initial=beam, max_nodes=50)
    assert not out.proven and out.stopped_by == "nodes" and out.nodes == 50
    assert out.score >= beam.score - 1e-4
    stopped = exact_search(model, src, cfg, initial=beam, stop=lambda: True)
    assert not stopped.proven and stopped.stopped_by == "cancelled"
