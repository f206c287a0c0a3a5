"""Independent items over forked worker processes, one torch thread each, on one machine.

A command line's items (a faithfulness sentence, a batch of the beam curve) are computed each on its
own, the same way whatever process runs it, so `workers` forked processes give the same results as
the calling process computing them in turn with one thread, bit for bit, in about 1 / workers of the
time on as many free cores. Forked, so the loaded model is shared copy-on-write (no pickling, no second
load); so only where a fork is safe (fork_safe): a CPU model, a platform that forks, and a process with
no other Python thread. The app's server runs other threads (a forked copy could inherit their locks
held), so its background jobs compute in turn (workers = 1).

For a split over several machines or GPUs, with torchrun, see explorer.runtime.split and
explorer.runtime.workers.
"""
from __future__ import annotations

import multiprocessing
import signal
import threading
from typing import Any, Callable, Iterator, Sequence

import torch

from explorer.runtime.workers import cores

_JOB: dict[str, Any] = {}               # what the forked workers inherit: the function and its items


def fork_safe(model: torch.nn.Module) -> bool:
    """Whether forking this process to compute on `model` is safe (module docstring)."""
    return ("fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            and all(p.device.type == "cpu" for p in model.parameters()))


def usable_workers(model: torch.nn.Module, items: int, at_most: int) -> int:
    """How many processes to split `items` items over: 1 where a fork is not safe, else one per core,
    at most `at_most` and one per item."""
    return max(1, min(at_most, cores(), items)) if fork_safe(model) else 1


def _one_thread() -> None:
    """Each worker: one torch thread, and Ctrl-C left to the parent (which ends the pool): a worker taking
    the terminal's SIGINT would print a traceback of its own beside the command's one line."""
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(index: int):
    return index, _JOB["function"](*_JOB["items"][index])


def imap(function: Callable, items: Sequence[tuple], workers: int, *, ordered: bool = True,
         order: Sequence[int] | None = None) -> Iterator[tuple[int, Any]]:
    """(i, function(*items[i])) for each item: in `order` (default: the items' own) with `ordered`, else
    as each ends, over `workers` forked processes when workers > 1 and there is more than one item
    (else here, in turn). A consumer that stops early (a cancelled job) ends the workers when the
    iterator is closed."""
    order = list(range(len(items))) if order is None else list(order)
    if workers <= 1 or len(items) <= 1:
        for i in order:
            yield i, function(*items[i])
        return
    _JOB.update(function=function, items=items)
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(items)), initializer=_one_thread) as pool:
            yield from (pool.imap if ordered else pool.imap_unordered)(_run, order)
    finally:
        _JOB.clear()
