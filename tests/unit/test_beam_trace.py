"""BeamTrace: complete, consistent with the returned hypotheses, plain data."""
from __future__ import annotations

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
