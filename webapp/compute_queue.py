"""A first-come, first-served queue in front of the model: how a classroom shares two cores.

Every session's script runs in its own thread of the one server process. Without a queue, 30
students pressing "translate" together start 30 computations that share the cores and all finish
late, none knowing why. With it, at most `slots` computations run at once (one per core by default,
$EXPLORER_COMPUTE_SLOTS), the rest wait in arrival order and see how many requests are ahead of
them; past `max_waiting` waiting requests a new one is turned away at once with a message
(QueueFull) instead of hanging until a timeout. Only cache misses queue: a result another student
already computed comes from the cache without waiting (webapp.result_cache).
"""
from __future__ import annotations

import os
import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

SLOTS_ENV = "EXPLORER_COMPUTE_SLOTS"
MAX_WAITING = 64


class QueueFull(RuntimeError):
    """Too many requests are waiting already; the message says so in words."""


class ComputeQueue:
    def __init__(self, slots: int, max_waiting: int = MAX_WAITING):
        if slots < 1 or max_waiting < 0:
            raise ValueError("slots >= 1, max_waiting >= 0")
        self.slots, self.max_waiting = slots, max_waiting
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()
        self._running = 0
        self._local = threading.local()                # a thread already holding a slot does not queue again

    def state(self) -> tuple[int, int]:
        """(running, waiting) now."""
        with self._cond:
            return self._running, len(self._waiting)

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """Hold one of the slots during the block. While waiting, on_wait(n) is called each time the
        number of requests ahead changes (n >= 0; 0: next in line) and once with -1 when the wait is over."""
        if getattr(self._local, "held", 0):
            self._local.held += 1                     # nested: the outer block already holds a slot
            try:
                yield
            finally:
                self._local.held -= 1
            return
        ticket = object()
        waited = False
        with self._cond:
            if self._running >= self.slots or self._waiting:
                if len(self._waiting) >= self.max_waiting:
                    raise QueueFull(f"The server is busy: {len(self._waiting)} requests are waiting already. "
                                    "Please try again in a moment.")
                self._waiting.append(ticket)
                waited, shown = True, None
                while self._running >= self.slots or self._waiting[0] is not ticket:
                    ahead = self._waiting.index(ticket)
                    if on_wait is not None and ahead != shown:
                        shown = ahead
                        self._cond.release()          # the callback draws on the page: not under the lock
                        try:
                            on_wait(ahead)
                        finally:
                            self._cond.acquire()
                        continue
                    self._cond.wait(timeout=1.0)
                self._waiting.popleft()
            self._running += 1
        if waited and on_wait is not None:
            on_wait(-1)
        self._local.held = 1
        try:
            yield
        finally:
            self._local.held = 0
            with self._cond:
                self._running -= 1
                self._cond.notify_all()


def default_slots() -> int:
    """$EXPLORER_COMPUTE_SLOTS, else one per core the process may use (at least 1)."""
    try:
        return max(1, int(os.environ[SLOTS_ENV]))
    except (KeyError, ValueError):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)


QUEUE = ComputeQueue(default_slots())
