"""The beam curve's batches split over worker processes, one thread each.

A test set's batches are independent (each is decoded on its own, the same rows in the same order
whatever process runs it), so running them in `workers` forked processes gives the same hypotheses as
running them in turn, bit for bit, in about 1 / workers of the time on as many free cores. Kept small
and local: a fork shares the loaded model copy-on-write (no pickling, no second load), so it is used only
where a fork is safe: a CPU model, a platform that forks, and a process with no other Python thread (a
command line; not the app's server, whose background jobs decode in turn). The caller lists the batches
cheapest first (short sources first); they go out in the reverse order, so the last ones to finish are
short and the workers end together.
"""
from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Callable, Sequence, TypeVar

import torch

Result = TypeVar("Result")
MAX_WORKERS = 2                  # the curve's goal is for 2 cores; more would share them

_job: Callable | None = None     # the function the forked workers run (set just before the fork)


def usable_workers(model: torch.nn.Module, batches: int) -> int:
    """How many processes to split `batches` batches over: 1 where a fork is not safe (module docstring)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                            # platforms without CPU affinity
        cores = os.cpu_count() or 1
    if ("fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1
            or any(p.device.type != "cpu" for p in model.parameters())):
        return 1
    return max(1, min(MAX_WORKERS, cores, batches))


def map_batches(run: Callable[[Sequence[int]], Result], batches: list[Sequence[int]], workers: int,
                done: Callable[[int, Result], None]) -> None:
    """run(batch) for every batch, done(i, result) in the calling process as each ends (in any order; it
    may raise to cancel: the workers are stopped). With workers == 1, in this process, in order."""
    if workers <= 1:
        for i, batch in enumerate(batches):
            done(i, run(batch))
        return
    global _job
    _job = run
    order = range(len(batches) - 1, -1, -1)                      # the costliest first
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=torch.set_num_threads,
                                                      initargs=(1,)) as pool:
            for i, result in pool.imap_unordered(_run_one, [(i, batches[i]) for i in order]):
                done(i, result)
    finally:
        _job = None


def _run_one(item: tuple[int, Sequence[int]]):
    i, batch = item
    return i, _job(batch)
