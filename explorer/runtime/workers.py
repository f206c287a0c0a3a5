"""How many processes an analysis command runs as: `--workers N` (default: one per core), and the
launch under torchrun that a command asking for more than one makes of itself.

`python -m explorer heads CKPT --workers 2` is `torchrun --standalone --nproc-per-node 2 -m
explorer.studies.heads CKPT ...`: the same engine a user may start by hand (with more nodes), each process
finding its share through explorer.runtime.split.from_env(). Each process computes with
cores // workers threads: processes each on their own core do more than one process whose small
torch calls take turns on Python's lock (runtime.compute_queue says why). `--workers 1` is the
single-process path. Only the main process prints the report and writes the result.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Sequence

from explorer.runtime.split import world_size


MAX_WORKERS = 64
AUTO_FROM = 32          # "auto" splits a run of at least this many sentences (one batch per process);
# a smaller one is done in the seconds that starting processes would take


def cores() -> int:
    """The cores this process may run on (its affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                          # not on Linux
        return os.cpu_count() or 1


def _workers(text: str) -> int | str:
    if text.strip() == "auto":
        return "auto"
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"workers >= 1 and <= {MAX_WORKERS} required, not {value}")
    return value


def add_workers(parser: argparse.ArgumentParser, when: str = "") -> None:
    """--workers, with one meaning in every command that has it: processes under torchrun, each taking
    its share of the items (`when` says for which of the command's modes, e.g. "with --faithfulness: ")."""
    parser.add_argument("--workers", type=_workers, default="auto",
                        help=f"{when}processes to split the work over on this machine, under torchrun (default auto: "
                             f"one per core, here {cores()}, from {AUTO_FROM} sentences on; 1: one process; the same "
                             "numbers with any count)")


def resolve_workers(asked: int | str, items: int) -> int:
    """The processes a run of `items` sentences takes: `asked`, or for "auto" one per core (at most
    one per sentence) when there are at least AUTO_FROM sentences, else one."""
    if asked == "auto":
        return min(cores(), MAX_WORKERS, items) if items >= AUTO_FROM else 1
    return int(asked)


def wants_launch(workers: int) -> bool:
    """More than one worker, and not already one of torchrun's processes."""
    return workers > 1 and world_size() <= 1                  # checked: WORLD_SIZE=abc is one line


def launch(module: str, argv: Sequence[str], workers: int) -> int:
    """`python -m module argv` as `workers` processes under torchrun (standalone rendezvous on this
    machine), each computing with cores // workers threads; returns the exit status."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(workers),
           "-m", module, *argv]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, cores() // workers))}
    return subprocess.call(cmd, env=env)
