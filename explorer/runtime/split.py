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

torchrun's variables (WORLD_SIZE, RANK, LOCAL_RANK) are read here once, checked (launch()), for the
analyses and for the trainer's DDP (explorer.training.distributed) alike: a value that is not a whole
number, a RANK missing or not below WORLD_SIZE is one `error: ...` line (LaunchError), not a traceback.
"""
from __future__ import annotations

import os
import re
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

WORLD_ENV, RANK_ENV, LOCAL_RANK_ENV = "WORLD_SIZE", "RANK", "LOCAL_RANK"   # what torchrun sets
# A whole number as explorer.files.limits.whole_number reads one (ASCII digits only: str.isdigit() takes "²",
# which int() refuses; spaces around allowed), written again here because runtime/ is the ground floor and
# may not import files/ (tests/unit/test_layout.py). 7 digits: far above any process count.
_WHOLE = re.compile(r"\s*([0-9]{1,7})\s*")


class LaunchError(SystemExit):
    """torchrun's environment names no process this one can be (WORLD_SIZE=abc, RANK missing or not
    below WORLD_SIZE), or its process group cannot be joined. A SystemExit whose message is the whole
    `error: ...` line: the commands reach from_env() outside their own error handling (the trainer
    before its lock, a study as it hands its split to finish()), and Python prints a SystemExit's
    message as that one line and exits 1."""

    def __init__(self, message: str):
        super().__init__(f"error: {message}")


@dataclass(frozen=True)
class Launch:
    """This process's place in torchrun's launch: rank, world (process count), local_rank (its GPU)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0


def _whole(name: str, default: int | None) -> int | None:
    """$name as a whole number; `default` when unset or empty; LaunchError when it is anything else."""
    text = os.environ.get(name, "")
    if not text.strip():
        return default
    found = _WHOLE.fullmatch(text)
    if found is None:
        shown = text if text.isprintable() and len(text) <= 40 else repr(text[:40])
        raise LaunchError(f"{name}={shown} is not a whole number (torchrun sets it; without {WORLD_ENV} "
                          "a command runs as one process)")
    return int(found.group(1))


def _processes(name: str) -> int:
    """$name as a number of processes: 1 when unset; LaunchError when it is not a whole number of at least 1."""
    count = _whole(name, 1)
    if count < 1:
        raise LaunchError(f"{name}={count} is not a number of processes (at least 1)")
    return count


def world_size() -> int:
    """How many processes torchrun started ($WORLD_SIZE): 1 when unset; LaunchError when it is not a
    whole number of at least 1."""
    return _processes(WORLD_ENV)


def local_world_size() -> int:
    """How many of torchrun's processes share this machine ($LOCAL_WORLD_SIZE): 1 when unset; LaunchError
    when it is not a whole number of at least 1 (the trainer's memory check multiplies by it)."""
    return _processes("LOCAL_WORLD_SIZE")


def launch() -> Launch:
    """This process's Launch, from torchrun's variables, checked: one process (rank 0 of 1) when
    WORLD_SIZE is unset or 1; with more, RANK must be set and RANK and LOCAL_RANK below WORLD_SIZE.
    LaunchError naming the variable otherwise."""
    world = world_size()
    if world == 1:
        return Launch()
    rank = _whole(RANK_ENV, None)
    if rank is None:
        raise LaunchError(f"{WORLD_ENV}={world} but {RANK_ENV} is not set (torchrun sets both; unset "
                          f"{WORLD_ENV} to run as one process)")
    local = _whole(LOCAL_RANK_ENV, 0)
    for name, value in ((RANK_ENV, rank), (LOCAL_RANK_ENV, local)):
        if value >= world:
            raise LaunchError(f"{name}={value} is not below {WORLD_ENV}={world} (ranks are 0 to {world - 1})")
    return Launch(rank=rank, world=world, local_rank=local)


def join_group(backend: str) -> None:
    """Join torchrun's process group (once per process); LaunchError when torch.distributed cannot
    start (MASTER_ADDR or MASTER_PORT missing, the rendezvous refused)."""
    import torch.distributed as dist   # only under torchrun: one process (and importing this) needs no torch

    if dist.is_initialized():
        return
    try:
        dist.init_process_group(backend=backend)
    except (ValueError, RuntimeError) as err:
        said = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise LaunchError(f"torch.distributed could not start: {said}") from None


def from_env() -> Split:
    """The Split torchrun's environment names (launch()), joining its process group (gloo, CPU
    tensors: what is gathered is small); one process when WORLD_SIZE is unset or 1."""
    place = launch()
    if place.world == 1:
        return ONE
    join_group("gloo")
    return Split(rank=place.rank, world=place.world)


def finish(split: Split) -> None:
    """Leave the process group (after the last gather)."""
    if split.active:
        import torch.distributed as dist   # only under torchrun: one process (and importing this) needs no torch

        if dist.is_initialized():
            dist.destroy_process_group()

