"""BeamTrace: complete, consistent with the returned hypotheses, plain data."""
from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch

from support.decoding_helpers import random_model, sources, trained  # noqa: F401 (fixtures)
from explorer.config import DecodeConfig
from explorer.decoding import STATUSES, beam_search

torch.set_num_threads(1)
LIVE = (STATUSES.index("kept"), STATUSES.index("forced"))


def check_complete(trace, decoded, k):
    cand = trace.candidates
    assert np.all(np.diff(cand["step"]) >= 0)
    live_at = {(int(r["step"]), int(r["slot"])): r for r in cand if r["status"] in LIVE}
    for r in cand:
        t, parent = int(r["step"]), int(r["parent"])
        if t == 0:
            assert parent == 0
            parent_score = 0.0
        else:                                   # every candidate extends a live hypothesis of step t-1
            assert (t - 1, parent) in live_at
            parent_score = float(live_at[(t - 1, parent)]["score"])
        assert r["score"] == pytest.approx(parent_score + float(r["token_logprob"]), abs=1e-4)
    for t in range(len(trace.prefix), trace.n_steps):
        rows = trace.at_step(t)
        assert len(rows) == 2 * k and list(rows["rank"]) == list(range(2 * k))
        assert np.all(np.diff(rows["score"]) <= 1e-6)              # ranked by cumulative score
        kept = rows[np.isin(rows["status"], (STATUSES.index("kept"), STATUSES.index("truncated")))]
        assert sorted(kept["slot"]) == list(range(k))
    assert len(trace.final) == len(decoded.hypotheses)
    for row, hyp in zip(trace.final, decoded.hypotheses):
        path = trace.path(int(row))
        assert trace.tokens(int(row)) == hyp.ids
        assert cand["token_logprob"][path] == pytest.approx(hyp.token_logprobs, abs=1e-5)
        assert float(cand["score"][row]) == pytest.approx(hyp.score, abs=1e-4)
        assert float(cand["normalized"][row]) == pytest.approx(hyp.normalized, abs=1e-4)
        assert trace.status(int(row)) == ("finished" if hyp.finished else "truncated")


@pytest.mark.parametrize("penalty", ["none", "average", "gnmt"])
def test_trace_is_complete_and_adds_up(trained, sources, penalty):
    cfg = DecodeConfig(beam_size=3, n_best=3, length_penalty=penalty)
    results = beam_search(trained, sources[:6], cfg, trace=True)
    plain = beam_search(trained, sources[:6], cfg)
    for d, p in zip(results, plain):
        assert [h.ids for h in d.hypotheses] == [h.ids for h in p.hypotheses]   # tracing changes nothing
        check_complete(d.trace, d, 3)
        assert "finished" in set(d.trace.to_dataframe()["status"])


def test_trace_with_prefix_and_truncation(trained, sources):
    cfg = DecodeConfig(beam_size=2, max_len_a=0, max_len_b=6, trace_top_k=3)
    d = beam_search(trained, sources[:2], cfg, prefix=[5, 6], trace=True)[1]
    trace = d.trace
    check_complete(trace, d, 2)
    assert trace.prefix == (5, 6)
    assert list(trace.candidates["status"][:2]) == [STATUSES.index("forced")] * 2
    assert trace.max_len == 6 and trace.n_steps <= 6
    alts = trace.alternatives
    assert set(alts["step"]) == set(range(trace.n_steps))
    assert np.all(alts["rank"] < 3)
    first = alts[alts["step"] == 2]                                  # the first free step: one live parent
    assert set(first["parent"]) == {0}
    chosen = trace.at_step(2)
    assert chosen["token"][0] == first["token"][0]                  # the best alternative is the best candidate


def test_trace_is_plain_picklable_data():
    model = random_model(5)
    d = beam_search(model, [[5, 6, 7, 3], [8, 3]], DecodeConfig(beam_size=4, max_len_b=5), trace=True)
    trace = d[0].trace
    copy = pickle.loads(pickle.dumps(trace))
    assert np.array_equal(copy.candidates, trace.candidates)
    frame = trace.to_dataframe(id_to_piece=lambda i: f"w{i}")
    assert list(frame.columns) == ["step", "rank", "parent", "slot", "token", "piece", "token_logprob", "score",
                                   "normalized", "status"]
    assert len(frame) == trace.n_steps * 8
    assert set(frame["status"]) <= set(STATUSES)
    alt = trace.alternatives_dataframe()
    assert len(alt) == 5 + (trace.n_steps - 1) * 4 * 5
    assert d[1].trace.max_len == 7 and d[0].trace.max_len == 9
    assert not any(isinstance(v, torch.Tensor) for v in vars(trace).values())


def test_trace_without_alternatives_and_early_stop_reason(trained, sources):
    d = beam_search(trained, sources[:1], DecodeConfig(beam_size=2, trace_top_k=0, early_stopping=True), trace=True)[0]
    assert len(d.trace.alternatives) == 0 and len(d.trace.alternatives_dataframe()) == 0
    assert d.trace.stop_reason == d.meta["stop_reason"] == "early_stopping"
    check_complete(d.trace, d, 2)


# ---- navigation: a hand-made trace whose slots differ from its ranks -------------------------------
def _hand_made_trace():
    """Beam of 2, three steps. Slots are not ranks, so following `parent` as a rank goes astray:
    step 0: rows 0-3 (10 slot 1, 11 slot 0, 12 and 13 pruned)
    step 1: rows 4-7 (3 from row 0 finished; 14 from row 1 slot 1; 15 from row 0 slot 0; 16 pruned)
    step 2: rows 8-11 (3 from row 5 finished; 17 from row 6, 18 from row 5 truncated; 19 pruned)"""
    from explorer.decoding.beam_trace import (ALTERNATIVE_DTYPE, CANDIDATE_DTYPE, FINISHED, KEPT, PRUNED,
                                              TRUNCATED, BeamTrace)
    rows = [  # step, rank, parent (slot), slot, token, token_logprob, status
        (0, 0, 0, 1, 10, -0.5, KEPT), (0, 1, 0, 0, 11, -0.7, KEPT), (0, 2, 0, -1, 12, -2.0, PRUNED),
        (0, 3, 0, -1, 13, -2.5, PRUNED),
        (1, 0, 1, -1, 3, -0.2, FINISHED), (1, 1, 0, 1, 14, -0.3, KEPT), (1, 2, 1, 0, 15, -0.4, KEPT),
        (1, 3, 0, -1, 16, -0.9, PRUNED),
        (2, 0, 1, -1, 3, -0.1, FINISHED), (2, 1, 0, 0, 17, -0.6, TRUNCATED), (2, 2, 1, 1, 18, -0.8, TRUNCATED),
        (2, 3, 0, -1, 19, -1.1, PRUNED)]
    cand = np.zeros(len(rows), dtype=CANDIDATE_DTYPE)
    for i, (step, rank, parent, slot, token, lp, status) in enumerate(rows):
        cand[i] = (step, rank, parent, slot, token, lp, lp, lp, status)
    alts = np.zeros(5, dtype=ALTERNATIVE_DTYPE)
    for i, (parent, rank, token, lp) in enumerate([(0, 0, 14, -0.3), (0, 1, 16, -0.9), (0, 2, 20, -1.5),
                                                   (1, 0, 3, -0.2), (1, 1, 15, -0.4)]):
        alts[i] = (1, parent, rank, token, lp, lp)
    return BeamTrace(candidates=cand, alternatives=alts, final=np.array([8, 4, 9]), beam_size=2,
                     length_penalty="none", alpha=0.0, prefix=(), max_len=3, stop_reason="max_len")


def test_navigation_follows_slots_not_ranks():
    trace = _hand_made_trace()
    assert trace.parent_rows().tolist() == [-1, -1, -1, -1, 0, 1, 0, 1, 5, 6, 5, 6]
    assert not trace.parent_rows().flags.writeable                  # shared by every caller: not to be edited
    assert trace.best_path() == trace.path(8) == [1, 5, 8]
    assert trace.tokens(8) == [11, 14, 3] and trace.tokens(4) == [10, 3] and trace.tokens(9) == [10, 15, 17]
    assert trace.step_rows(1).tolist() == [4, 5, 6, 7] and trace.step_rows(3).tolist() == []
    copy = pickle.loads(pickle.dumps(trace))
    assert copy.parent_rows().tolist() == trace.parent_rows().tolist() and copy.best_path() == [1, 5, 8]


def test_alternatives_are_what_the_rows_parent_proposed_best_first():
    trace = _hand_made_trace()
    assert trace.alternatives_for(7) == [(14, pytest.approx(-0.3)), (16, pytest.approx(-0.9)),
                                         (20, pytest.approx(-1.5))]              # row 1's proposals
    assert trace.alternatives_for(6) == [(3, pytest.approx(-0.2)), (15, pytest.approx(-0.4))]   # row 0's
    assert trace.alternatives_for(11) == [(17, pytest.approx(-0.6)), (19, pytest.approx(-1.1))]  # none recorded:
    # the ranked siblings (same parent row) still are


def test_an_empty_search_has_no_best_path():
    empty = dataclasses.replace(_hand_made_trace(), final=np.zeros(0, dtype=np.int64))
    assert empty.best_path() == [] and empty.path(9) == [0, 6, 9]
