"""Attributions (gradient x input, integrated gradients) run in batches bounded in bytes, so their
memory does not grow with the square of a pair's length, and several users asking at once share the
compute queue's places instead of each holding a batch of every target.

Batching must not change the numbers: each row's gradient is its own target's (checked against one
row per batch). The memory bound is measured in a fresh process (its own peak, VmHWM).
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from explorer.studies.align import attribution as A
from explorer.studies.align.gold import GoldPair
from explorer.studies.align.pairs import model_pair
from support.decoding_helpers import StandInTokenizer, random_model
from support.numerics import gradient_atol, model_atol
from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("method", A.ATTRIBUTIONS)
def test_batches_of_any_size_give_the_same_attributions(method):
    model, tok = random_model(seed=3, d_model=16, n_heads=2, d_ff=32), StandInTokenizer()
    mp = model_pair(model, tok, GoldPair(list("abcde"), list("dcbae"), frozenset()))
    whole, whole_delta = A.piece_attributions(model, mp, method, steps=8, with_delta=True)
    single, single_delta = A.piece_attributions(model, mp, method, steps=8, with_delta=True, budget=1)
    assert A.rows_per_batch(model.cfg, len(mp.src_ids), len(mp.out_ids), budget=1) == 1
    assert whole.shape == (len(mp.out_ids), len(mp.src_ids))
    # other batch shapes, so other orders of the same forward and backward sums: attributions within
    # gradient_atol, deltas (which hold F(x) - F(0), two log-probs) within model_atol; a target's row in
    # another's place differs by > 1e-2
    atol = gradient_atol(model, whole)
    np.testing.assert_allclose(single, whole, rtol=0, atol=atol)
    np.testing.assert_allclose(single_delta, whole_delta, rtol=0, atol=model_atol(model, whole, whole_delta))
    some = A.piece_attributions(model, mp, method, steps=8, targets=[4, 1], budget=1)
    np.testing.assert_allclose(some, whole[[4, 1]], rtol=0, atol=atol)


def test_rows_per_batch_shrink_as_pairs_grow():
    from explorer.config import preset
    cfg = preset("small", src_vocab_size=8000, tgt_vocab_size=8000)
    short, long = A.rows_per_batch(cfg, 25, 24), A.rows_per_batch(cfg, 190, 180)
    assert short > 4 * long >= 4
    assert long * A.row_bytes(cfg, 190, 180) <= A.ATTRIBUTION_BYTES


def test_the_batched_paths_groups_fit_the_budget():
    """Targets x path points of one batched pass: within the budget wherever one row fits; more
    targets a group as the budget grows, fewer as pairs grow; one target and one point at the least."""
    from explorer.studies.common.gradients import batch_shape, target_bytes
    from explorer.config import preset
    cfg = preset("small", src_vocab_size=8000, tgt_vocab_size=8000)
    for s, t in ((25, 24), (60, 58), (190, 180)):
        row, each = A.row_bytes(cfg, s, t), target_bytes(cfg, s, t)
        for budget in (48 << 20, A.ATTRIBUTION_BYTES, 1 << 30):
            group, points = batch_shape(cfg, s, t, t, 32, budget)
            assert 1 <= group <= t and 1 <= points <= 32
            assert points * (row + group * each) <= budget
    assert batch_shape(cfg, 25, 24, 24, 32, 48 << 20)[0] > batch_shape(cfg, 190, 180, 180, 32, 48 << 20)[0]
    assert batch_shape(cfg, 25, 24, 24, 32, 1 << 30) == (24, 32)
    assert batch_shape(cfg, 190, 180, 180, 32, 1) == (1, 1)


PROBE = textwrap.dedent("""
    import json, sys, threading
    import torch
    torch.set_num_threads(1)
    from explorer.studies.align import attribution as A
    from explorer.studies.align.gold import GoldPair, read_gold
    from explorer.studies.align.pairs import model_pair
    from explorer.runtime.compute_queue import QUEUE
    from explorer.store.checkpoint import load_checkpoint

    def status(key):
        return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) * 1024

    budget, users = int(sys.argv[1]), int(sys.argv[2])
    ck = load_checkpoint("checkpoints/bible-es-en")
    gold = read_gold("gold/bible-es-en.align")
    pairs = [GoldPair((g.src * 4)[:45], (g.tgt * 4)[:45], frozenset()) for g in gold[:users]]
    mps = [model_pair(ck.model, ck.tokenizer, p) for p in pairs]
    A.piece_attributions(ck.model, model_pair(ck.model, ck.tokenizer, gold[5]), "grad-x-input")   # warm
    rows = max(A.rows_per_batch(ck.model.cfg, len(m.src_ids), len(m.out_ids), budget) for m in mps)
    row = max(A.row_bytes(ck.model.cfg, len(m.src_ids), len(m.out_ids)) for m in mps)
    before = status("VmRSS")
    threads = [threading.Thread(target=A.piece_attributions, args=(ck.model, m, "grad-x-input"),
                                kwargs={"budget": budget}) for m in mps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"added": status("VmHWM") - before, "slots": QUEUE.slots, "rows": rows, "row": row}))
""")


def test_four_users_at_once_stay_within_the_queues_places_times_the_budget():
    """Four users attributing 45-word pairs at once: at most `slots` batches exist at a time (the compute
    queue), each at most the budget; the old single batch of every target took ~0.45 GB per such pair."""
    budget = 48 << 20
    run = run_watched([sys.executable, "-c", PROBE, str(budget), "4"], "four users attributing", cwd=ROOT,
                      env={**__import__("os").environ, "EXPLORER_COMPUTE_SLOTS": "2", "MALLOC_ARENA_MAX": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["slots"] == 2 and found["rows"] >= 2
    assert found["added"] < found["slots"] * budget + (48 << 20), found
