"""capture(): hooks only inside the block, always removed, one trace per thread (threads at once), no aliasing."""
from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import torch

from explorer.inspection.hooks import ablate_heads, capture, capture_points, intervene, match
from explorer.model import CapturePoint
from explorer.inspection.trace import Trace, attention_name
from support.numerics import float32_atol, scale
from support.waiting import STALL_S, join


def hooks_left(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()
               if isinstance(m, CapturePoint))


def traced(model, src, tgt, patterns="*") -> Trace:
    with torch.no_grad(), capture(model, patterns) as trace:
        model(src, tgt)
    return trace


def inputs(seed: int, B: int, S: int, T: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 40, (B, S), generator=g), torch.randint(3, 40, (B, T), generator=g)


def test_hooks_exist_only_inside_capture(model, batch):
    assert hooks_left(model) == 0
    with capture(model, "decoder.layers.*.cross_attn.weights") as trace:
        assert hooks_left(model) == model.cfg.n_decoder_layers
        with torch.no_grad():
            model(*batch)
    assert hooks_left(model) == 0
    assert trace.names() == [f"decoder.layers.{i}.cross_attn.weights" for i in range(2)]


def test_hooks_removed_when_the_block_raises(model, batch):
    with pytest.raises(RuntimeError, match="boom"):
        with capture(model, "*"):
            assert hooks_left(model) > 0
            raise RuntimeError("boom")
    assert hooks_left(model) == 0
    done = []                                       # and another thread captures normally afterwards
    worker = threading.Thread(target=lambda: done.append(traced(model, *batch, "generator.logits")))
    worker.start()
    join(worker, "the capture in another thread")
    assert done and "generator.logits" in done[0].arrays


def test_unknown_pattern_is_an_error_and_leaves_no_hooks(model):
    with pytest.raises(ValueError, match="no capture point"):
        with capture(model, "encoder.layers.9.*"):
            pass
    assert hooks_left(model) == 0
    assert match(model, "encoder.layers.0.self_attn.*")[0] == "encoder.layers.0.self_attn.scores"
    assert len(capture_points(model)) == len(set(capture_points(model)))


def test_trace_arrays_are_copies_not_views_of_the_model(batch):
    """Regression: embed.positions used to alias the model's PE table through .numpy()."""
    from support.model_helpers import make_model
    for positions in ("sinusoidal", "learned"):
        model = make_model(positions=positions)
        before = {k: v.clone() for k, v in model.named_buffers()} | {k: v.clone() for k, v in model.state_dict().items()}
        trace = traced(model, *batch)
        for arr in trace.arrays.values():
            arr[...] = 123.0                         # a page normalising a heatmap in place
        after = dict(model.named_buffers()) | model.state_dict()       # the PE table is a non-persistent buffer
        assert sorted(after) == sorted(before)
        for k, v in after.items():
            assert torch.equal(v, before[k]), k


def test_trace_is_picklable(model, batch):
    trace = traced(model, *batch, "encoder.*.weights")
    copy = pickle.loads(pickle.dumps(trace))
    assert copy.names() == trace.names()
    np.testing.assert_array_equal(copy.attention("encoder", 0), trace.attention("encoder", 0))
    assert trace.n_layers("encoder") == 2
    assert attention_name("cross", 1, "scores") == "decoder.layers.1.cross_attn.scores"


def test_two_threads_capturing_each_get_their_own_trace(model):
    """Two captures at once (different inputs and shapes) plus a plain forward meanwhile."""
    a, b = inputs(1, 2, 7, 5), inputs(2, 3, 4, 6)
    alone = {"a": traced(model, *a), "b": traced(model, *b)}
    results: dict[str, Trace] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(3)
    stop = threading.Event()

    def capture_job(key, ins):
        try:
            start.wait(STALL_S)
            for _ in range(3):
                results[key] = traced(model, *ins)
        except BaseException as exc:              # surfaced below, not lost in the thread
            errors.append(exc)

    def plain_job():
        start.wait(STALL_S)
        src, tgt = inputs(3, 1, 9, 8)
        with torch.no_grad():
            while not stop.is_set():
                model(src, tgt)

    threads = [threading.Thread(target=capture_job, args=("a", a)),
               threading.Thread(target=capture_job, args=("b", b)),
               threading.Thread(target=plain_job)]
    for t in threads:
        t.start()
    for t in threads[:2]:
        join(t, "the capturing threads")
    stop.set()
    join(threads[2], "the plain forward thread")
    assert not errors, errors
    for key in ("a", "b"):
        got, want = results[key], alone[key]
        assert got.names() == want.names()
        for name in want.names():
            assert got[name].shape == want[name].shape, name
            # the same inputs and shapes; a kernel may still add in another order from call to call (MKL's
            # paths follow the data's alignment): sums of up to d_ff terms within the point's largest value.
            # Another thread's numbers in this trace would differ by ~0.1 or more
            atol = float32_atol(scale(want[name]), model.cfg.d_ff)
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=atol, err_msg=name)
    assert hooks_left(model) == 0


def test_intervene_and_ablate_heads_edit_only_inside_the_block(model, batch):
    with torch.no_grad():
        base = model(*batch)
        with ablate_heads(model, [("cross", 0, 1), ("cross", 0, 3)]), \
                capture(model, "decoder.layers.0.cross_attn.context") as trace:
            ablated = model(*batch)
        after = model(*batch)
        with intervene(model, {"generator.logits": lambda t: t * 0}):
            flat = model(*batch)
    ctx = trace["decoder.layers.0.cross_attn.context"]                        # [B, H, T, dh]
    assert np.all(ctx[:, [1, 3]] == 0) and np.any(ctx[:, 0] != 0)
    assert (ablated - base).abs().max() > 1e-4
    torch.testing.assert_close(after, base, rtol=0, atol=0)
    # log_softmax of 40 zeros: the sum of 40 ones is exact in any order, only log(40) rounds (~2e-7)
    torch.testing.assert_close(flat, torch.full_like(flat, -np.log(40)), rtol=0, atol=1e-5)
    assert hooks_left(model) == 0


def test_captures_in_threads_run_at_once_and_each_gets_its_own_numbers(model, batch):
    """Two threads capture (one also ablates heads) on the shared model at the same time: neither
    waits for the other, and each trace equals the one its thread records alone, bit for bit (another
    thread's hooks change neither what is recorded nor which computation path runs)."""
    from explorer.model.layers import hooked

    alone_plain = traced(model, *batch, "decoder.layers.*.cross_attn.weights")
    with ablate_heads(model, [("cross", 0, 1)]):
        alone_ablated = traced(model, *batch, "decoder.layers.*.cross_attn.weights")
    inside, release, seen, results = threading.Event(), threading.Event(), [], {}

    def first():
        with capture(model, "generator.logits"):
            inside.set()
            release.wait(STALL_S)                   # holds its hooks open while the second one works

    def second():
        inside.wait(STALL_S)
        seen.append(hooked(model))                  # the first thread's hooks do not count here
        results["plain"] = traced(model, *batch, "decoder.layers.*.cross_attn.weights")
        with ablate_heads(model, [("cross", 0, 1)]):
            results["ablated"] = traced(model, *batch, "decoder.layers.*.cross_attn.weights")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    join(threads[1], "the second capture")          # finished while the first capture is still open
    assert threads[0].is_alive()                    # (it waits for release, which is not set yet)
    release.set()
    join(threads[0], "the first capture to close")
    assert seen == [False]
    for name in alone_plain.names():
        np.testing.assert_array_equal(results["plain"][name], alone_plain[name])
        np.testing.assert_array_equal(results["ablated"][name], alone_ablated[name])
    assert hooks_left(model) == 0
