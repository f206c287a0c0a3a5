"""The model's queue: at most `slots` computations at once, the rest in arrival order, each told how
many are ahead; a full queue says so at once; nested use does not deadlock. And the shared result
cache computes a result once while several sessions ask for it at the same moment."""
import threading
import time

import pytest

from explorer.runtime.compute_queue import ComputeQueue, QueueFull
from webapp.result_cache import bounded_cache


def test_first_come_first_served_with_places_reported():
    queue = ComputeQueue(slots=1)
    release, order, seen = threading.Event(), [], {}
    holder_in = threading.Event()

    def holder():
        with queue.slot():
            holder_in.set()
            release.wait(timeout=10)
            order.append("holder")

    def waiter(name):
        seen[name] = []
        with queue.slot(lambda ahead: seen[name].append(ahead)):
            order.append(name)

    first = threading.Thread(target=holder)
    first.start()
    holder_in.wait(timeout=10)
    threads = []
    for name in ("a", "b", "c"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        while queue.state()[1] < len(threads):          # each one queued before the next arrives
            time.sleep(0.01)
    assert queue.state() == (1, 3)
    release.set()
    for t in [first] + threads:
        t.join(timeout=10)
    assert order == ["holder", "a", "b", "c"]
    assert seen["c"][0] == 2 and seen["c"][-1] == -1 and seen["c"][:-1] == sorted(seen["c"][:-1], reverse=True)
    assert seen["a"] == [0, -1]
    assert queue.state() == (0, 0)


def test_a_full_queue_turns_a_request_away_at_once():
    queue = ComputeQueue(slots=1, max_waiting=1)
    release, inside = threading.Event(), threading.Event()

    def hold():
        with queue.slot():
            inside.set()
            release.wait(timeout=10)

    def wait_in_line():
        with queue.slot():
            pass

    threads = [threading.Thread(target=hold), threading.Thread(target=wait_in_line)]
    threads[0].start()
    inside.wait(timeout=10)
    threads[1].start()
    while queue.state()[1] < 1:
        time.sleep(0.01)
    t0 = time.monotonic()
    with pytest.raises(QueueFull, match="busy"):
        with queue.slot():
            pass
    assert time.monotonic() - t0 < 1
    release.set()
    for t in threads:
        t.join(timeout=10)


def test_nested_slots_in_one_thread_do_not_deadlock():
    queue = ComputeQueue(slots=1)
    with queue.slot():
        with queue.slot():
            assert queue.state() == (1, 0)
    assert queue.state() == (0, 0)


def test_a_result_asked_for_by_many_at_once_is_computed_once():
    calls, gate = [], threading.Event()

    @bounded_cache(10_000_000)
    def slow(x):
        calls.append(x)
        gate.wait(timeout=10)
        return [x] * 3

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow(7))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(timeout=10)
    assert calls == [7] and results == [[7, 7, 7]] * 8
    results[0].append("changed")                  # each caller still gets its own copy
    assert slow(7) == [7, 7, 7]


def test_a_failed_computation_is_not_cached_and_the_next_caller_retries():
    attempts = []

    @bounded_cache(10_000_000)
    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise RuntimeError("first try fails")
        return x

    with pytest.raises(RuntimeError):
        flaky(1)
    assert flaky(1) == 1 and len(attempts) == 2


def test_decodes_wait_for_a_place_in_the_library_queue(model, monkeypatch):
    """Every decode takes a place in the process's queue: with one place taken, a decode in another
    thread waits (in line, counted) until the place is free, then finishes."""
    from explorer.runtime import compute_queue
    from explorer.decoding.beam import beam_search
    from explorer.config import DecodeConfig

    queue = ComputeQueue(slots=1)
    monkeypatch.setattr(compute_queue, "QUEUE", queue)
    monkeypatch.setattr("explorer.decoding.core.QUEUE", queue)
    done = threading.Event()

    def decode():
        beam_search(model, [[5, 6, 7, 2]], DecodeConfig(strategy="beam", beam_size=2, max_len_b=4))
        done.set()

    with queue.slot():                                  # this thread's computation holds the only place
        worker = threading.Thread(target=decode)
        worker.start()
        deadline = time.monotonic() + 10
        while queue.state() != (1, 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert queue.state() == (1, 1)                  # the decode waits in line ...
        assert not done.wait(timeout=0.3)               # ... and does not run meanwhile
    worker.join(timeout=30)
    assert done.is_set() and queue.state() == (0, 0)


def test_a_background_thread_does_not_queue():
    from explorer.runtime.compute_queue import background_thread

    queue = ComputeQueue(slots=1)
    entered = threading.Event()

    def analysis():
        background_thread()
        with queue.slot():
            entered.set()

    with queue.slot():
        t = threading.Thread(target=analysis)
        t.start()
        assert entered.wait(timeout=10)                 # ran beside the held place, without waiting
        t.join(timeout=10)
    assert queue.state() == (0, 0)


def test_default_places_follow_torch_threads(monkeypatch):
    import os

    import torch

    from explorer.runtime.compute_queue import SLOTS_ENV, default_slots

    monkeypatch.delenv(SLOTS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert default_slots() == 2                         # 4 cores, 2 torch threads per computation
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    assert default_slots() == 1
    monkeypatch.setenv(SLOTS_ENV, "3")
    assert default_slots() == 3
