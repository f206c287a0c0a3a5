"""A first-come, first-served queue in front of the model: how threads share the cores.

Every decode and every captured forward (decoding.core.decoding_session) takes a place here, so at
most `slots` computations run at once: one per core's worth of torch threads by default (cores //
torch.get_num_threads(), $EXPLORER_COMPUTE_SLOTS to choose), the rest wait in arrival order. Why:
a decode is thousands of small torch calls, and each call lets go of Python's GIL while it computes
and takes it back after; with more computing threads than cores, they queue for the GIL at every
call and the whole process does less work than one thread alone (8 threads on 2 cores: 0.7-0.9x
the throughput of running the same decodes one after another; 2 threads: 1.4x; measured by
`python -m benchmarks concurrent`).

In the app every session's script runs in its own thread of the one server process: 30 students
pressing "translate" together wait in line here and see how many requests are ahead of them
(webapp.models passes `on_wait`); past `max_waiting` waiting requests a new one is turned away
at once with a message (QueueFull) instead of hanging until a timeout. Background analyses (the head
lab, the alignment scorecard) do not queue (`background_thread`): they run at a lower CPU priority
beside the users instead of taking their places for minutes.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

SLOTS_ENV = "EXPLORER_COMPUTE_SLOTS"
MAX_WAITING = 64


class QueueFull(RuntimeError):
    """Too many requests are waiting already; the message says so in words."""


class ComputeQueue:
    """`slots`: how many computations run at once; None: default_slots() at each request, so a later
    torch.set_num_threads (the app sets its count after import) is followed."""

    def __init__(self, slots: int | None = None, max_waiting: int = MAX_WAITING):
        if (slots is not None and slots < 1) or max_waiting < 0:
            raise ValueError("slots >= 1, max_waiting >= 0")
        self._slots, self.max_waiting = slots, max_waiting
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()
        self._running = 0
        self._local = threading.local()                # a thread already holding a slot does not queue again

    @property
    def slots(self) -> int:
        return self._slots if self._slots is not None else default_slots()

    def state(self) -> tuple[int, int]:
        """(running, waiting) now."""
        with self._cond:
            return self._running, len(self._waiting)

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """Hold one of the slots during the block. While waiting, on_wait(n) is called each time the
        number of requests waiting ahead changes (n >= 0; 0: next in line) and once with -1 when the wait is
        over. Whatever ends a wait early (an exception from on_wait included) takes the request out of the
        line, and a slot taken is always given back."""
        if getattr(self._local, "held", 0) or _EXEMPT.flag:
            self._local.held = getattr(self._local, "held", 0) + 1   # nested (the outer block holds a
                                                                      # slot) or a background thread
            try:
                yield
            finally:
                self._local.held -= 1
            return
        ticket = object()
        waited = False
        slots = self.slots
        with self._cond:
            if self._running >= slots or self._waiting:
                if len(self._waiting) >= self.max_waiting:
                    raise QueueFull(f"The server is busy: {len(self._waiting)} requests are waiting already. "
                                    "Please try again in a moment.")
                self._waiting.append(ticket)
                waited = True
                try:
                    self._wait_turn(ticket, slots, on_wait)
                except BaseException:
                    # The waiter left (Streamlit stops a script whose user clicked again, from inside
                    # on_wait): its ticket must leave the line, or everyone behind it waits forever.
                    self._waiting.remove(ticket)
                    self._cond.notify_all()
                    raise
                self._waiting.popleft()
            self._running += 1
        self._local.held = 1
        try:
            if waited and on_wait is not None:
                on_wait(-1)                            # may raise too: inside the block that gives the slot back
            yield
        finally:
            self._local.held = 0
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def _wait_turn(self, ticket: object, slots: int, on_wait: Callable[[int], None] | None) -> None:
        """Wait, holding self._cond, until `ticket` heads the line and a slot is free; on_wait(n) each time
        the number of requests ahead changes, called with the lock let go (it draws on a page)."""
        shown = None
        while self._running >= slots or self._waiting[0] is not ticket:
            ahead = self._waiting.index(ticket)
            if on_wait is not None and ahead != shown:
                shown = ahead
                self._cond.release()
                try:
                    on_wait(ahead)
                finally:
                    self._cond.acquire()
                continue
            self._cond.wait(timeout=1.0)


def default_slots() -> int:
    """$EXPLORER_COMPUTE_SLOTS, else the cores the process may use divided by torch's thread count
    per computation (at least 1)."""
    try:
        return max(1, int(os.environ[SLOTS_ENV]))
    except (KeyError, ValueError):
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, torch.get_num_threads()))


class _Exempt(threading.local):
    flag = False


_EXEMPT = _Exempt()


def background_thread() -> None:
    """Mark the calling thread as background work: its computations never wait in the queue (nor
    count in it). For long analyses that run at a lower CPU priority (runtime.priority) beside the
    users; holding a user's place for minutes would be worse for them than sharing the cores."""
    _EXEMPT.flag = True


QUEUE = ComputeQueue()
