"""Sentences over worker processes: the faithfulness scorecard's sentences are independent, so a command
can use every core by giving each worker whole sentences (one torch thread each) instead of splitting
one sentence's small products across threads.

Workers are forked from the process that holds the model (so it is not copied or loaded again) and
each computes a sentence exactly as the process itself would with one thread; results come back in
the sentences' order, so the outcome does not depend on the number of workers. Only for command
lines: a forked copy of a process that runs other threads (the app's server) may inherit their locks
held, so the app runs its jobs in its own process (workers=1).
"""
from __future__ import annotations

import multiprocessing
from typing import Any, Callable, Iterator, Sequence

import torch

_JOB: dict[str, Any] = {}               # what the forked workers inherit: the function and its items


def _one_thread() -> None:
    torch.set_num_threads(1)


def _run(index: int):
    return _JOB["function"](*_JOB["items"][index])


def ordered_map(function: Callable, items: Sequence[tuple], workers: int) -> Iterator:
    """function(*item) for each item, in order; over `workers` forked processes when workers > 1.
    A consumer that stops early (a cancelled job) ends the workers when the iterator is closed."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            yield function(*item)
        return
    _JOB.update(function=function, items=items)
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(items)), initializer=_one_thread) as pool:
            yield from pool.imap(_run, range(len(items)))
    finally:
        _JOB.clear()
