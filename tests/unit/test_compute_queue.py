"""The model's queue: at most `slots` computations at once, the rest in arrival order, each told how
many are ahead; a full queue says so at once; nested use does not deadlock. And the shared result
cache computes a result once while several sessions ask for it at the same moment."""
import threading
import time

import pytest

from explorer.runtime.compute_queue import ComputeQueue, QueueFull
from webapp.result_cache import bounded_cache
from support.waiting import STALL_S, join, wait_event, wait_until

# Threads here wait on each other's events, never on a clock: a wait's STALL_S bound is a hang guard only.


def test_first_come_first_served_with_places_reported():
    queue = ComputeQueue(slots=1)
    release, order, seen = threading.Event(), [], {}
    holder_in = threading.Event()

    def holder():
        with queue.slot():
            holder_in.set()
            release.wait(STALL_S)
            order.append("holder")

    def waiter(name):
        seen[name] = []
        with queue.slot(lambda ahead: seen[name].append(ahead)):
            order.append(name)

    first = threading.Thread(target=holder)
    first.start()
    wait_event(holder_in, "the holder to take the place")
    threads = []
    for name in ("a", "b", "c"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        wait_until(lambda: queue.state()[1] >= len(threads), f"{name} to queue")   # each queued before the next
    assert queue.state() == (1, 3)
    release.set()
    for t in [first] + threads:
        join(t, "the queue to empty")
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
            release.wait(STALL_S)

    def wait_in_line():
        with queue.slot():
            pass

    threads = [threading.Thread(target=hold), threading.Thread(target=wait_in_line)]
    threads[0].start()
    wait_event(inside, "the holder to take the place")
    threads[1].start()
    wait_until(lambda: queue.state()[1] >= 1, "the second request to queue")
    with pytest.raises(QueueFull, match="busy"):
        with queue.slot():
            pass
    # at once: turned away while the place is still held and the line still full (release is not set until
    # now), so it did not wait for a place; no stopwatch, which a busy machine would fail
    assert queue.state() == (1, 1) and not release.is_set()
    release.set()
    for t in threads:
        join(t, "the queue to empty")


class _Left(Exception):
    """What Streamlit raises inside a waiting user's on_wait when that user clicks again (a rerun)."""


@pytest.mark.parametrize("leaves_at", ["while waiting", "as the wait ends"])
def test_a_waiter_who_leaves_takes_its_place_out_of_the_line(leaves_at):
    """A waiter whose on_wait raised stayed at the head of the line (no request ran again: the server
    wedged), or, raising on -1, kept its slot for good."""
    queue = ComputeQueue(slots=1)
    release, holder_in, outcome = threading.Event(), threading.Event(), {}

    def holder():
        with queue.slot():
            holder_in.set()
            release.wait(STALL_S)

    def leaver(ahead):
        if (ahead >= 0) == (leaves_at == "while waiting"):
            raise _Left

    def leaving():
        try:
            with queue.slot(leaver):
                outcome["ran"] = True
        except _Left:
            outcome["left"] = True

    first = threading.Thread(target=holder)
    first.start()
    wait_event(holder_in, "the holder to take the place")
    gone = threading.Thread(target=leaving)
    gone.start()
    if leaves_at == "while waiting":
        join(gone, "the leaver to leave")
        assert outcome == {"left": True} and queue.state() == (1, 0)
    release.set()
    join(first, "the holder to finish")
    join(gone, "the leaver to finish")
    assert outcome == {"left": True} and queue.state() == (0, 0)
    with queue.slot():                                 # the next request gets a place: nothing wedged
        assert queue.state() == (1, 0)
    assert queue.state() == (0, 0)


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
        gate.wait(STALL_S)
        return [x] * 3

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow(7))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        join(t, "the callers to get the result")
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
        wait_until(lambda: queue.state() == (1, 1), "the decode to queue")      # the decode waits in line ...
        assert not done.wait(timeout=0.3)               # ... and does not run meanwhile (load only makes it surer)
    join(worker, "the decode to finish")
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
        wait_event(entered, "the background thread to enter")      # ran beside the held place, without waiting
        join(t, "the background thread to finish")
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
