"""Work split over processes: each process takes every world-th item, the results are gathered in order.

An analysis over a test set is a list of independent items (a batch of sentences, a head to remove,
a point of a curve, a gold pair). Under `torchrun --nproc-per-node N` (the engine the trainer uses:
RANK / WORLD_SIZE in the environment) every process runs the same analysis with a Split of its own
rank; it computes the items `mine()` gives it, and `gather()` hands every process all the results in
the items' order, so what comes after (sums, scores, the JSON) is computed from the same values in
the same order as in one process, and the numbers are the same. Outside torchrun a Split is one
process that owns everything and gather() is a copy: the single-process path is the same code.

Each item is computed by one process exactly as one process would compute it (same batch, same
padding), so splitting changes who computes, never what. Items go round-robin (item i to rank
i mod N): neighbouring items cost alike (batches in length order, heads of one layer), so the ranks
finish close together. gather() moves plain Python data (pickled through torch.distributed's gloo
backend): what is gathered should be results, not activations.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Split:
    rank: int = 0
    world: int = 1

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        """The process that reports progress and writes the result (rank 0)."""
        return self.rank == 0

    def mine(self, n: int) -> range:
        """Indices of the items (of n) this process computes."""
        return range(self.rank, n, self.world)

    def gather(self, results: dict[int, Any], n: int) -> list:
        """Every item's result in item order, on every process; `results` holds this process's own
        (index -> result, the indices of mine(n))."""
        if not self.active:
            return [results[i] for i in range(n)]
        import torch.distributed as dist   # only under torchrun: one process (and importing this) needs no torch

        parts: list[dict[int, Any] | None] = [None] * self.world
        dist.all_gather_object(parts, results)
        merged: dict[int, Any] = {}
        for part in parts:
            merged.update(part or {})
        missing = [i for i in range(n) if i not in merged]
        if missing:
            raise RuntimeError(f"split: {len(missing)} of {n} items computed by no process (first: {missing[0]})")
        return [merged[i] for i in range(n)]

    def map(self, items: Sequence[T], compute: Callable[[T], R], tick: Callable[[int], Any] | None = None) -> list[R]:
        """compute(item) for every item, split over the processes, gathered in order. tick(done) is
        called after each of this process's items with how many it has done (times world, an estimate
        of the whole: each process does about 1/world of the items)."""
        own: dict[int, R] = {}
        for count, i in enumerate(self.mine(len(items)), 1):
            own[i] = compute(items[i])
            if tick is not None:
                tick(min(len(items), count * self.world))
        return self.gather(own, len(items))

    def any(self, flag: bool) -> bool:
        """True on every process when it is True on any one (to stop together)."""
        if not self.active:
            return flag
        import torch   # only under torchrun, as torch.distributed below
        import torch.distributed as dist   # only under torchrun: one process (and importing this) needs no torch

        t = torch.tensor([1 if flag else 0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())


ONE = Split()


def from_env() -> Split:
    """The Split torchrun's environment names (RANK, WORLD_SIZE), joining its process group (gloo,
    CPU tensors: what is gathered is small); one process when WORLD_SIZE is unset or 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return ONE
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    return Split(rank=int(os.environ["RANK"]), world=world)


def finish(split: Split) -> None:
    """Leave the process group (after the last gather)."""
    if split.active:
        import torch.distributed as dist   # only under torchrun: one process (and importing this) needs no torch

        if dist.is_initialized():
            dist.destroy_process_group()

