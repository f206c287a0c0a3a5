"""DistributedDataParallel when launched by torchrun; a no-op otherwise.

`torchrun --nproc-per-node N -m explorer.train ...` sets RANK/WORLD_SIZE; each rank trains on its
shard of every epoch's batches and rank 0 alone writes the run directory.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from explorer.runtime.device import resolve_device
from explorer.runtime.split import Split, join_group, launch


@dataclass(frozen=True)
class Dist(Split):
    """A Split (rank, world, active, is_main: explorer.runtime.split) with the rank's local GPU index."""

    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "Dist":
        """torchrun's place for this process (explorer.runtime.split.launch, checked: LaunchError, one
        `error: ...` line, for a bad WORLD_SIZE / RANK / LOCAL_RANK), its process group joined."""
        place = launch()
        if place.world == 1:
            return cls()
        join_group("nccl" if torch.cuda.is_available() else "gloo")
        return cls(rank=place.rank, world=place.world, local_rank=place.local_rank)

    def device(self, name: str) -> torch.device:
        """The device `name` resolves to (explorer.runtime.device.resolve_device); a rank's plain CUDA is its own GPU."""
        device = resolve_device(name)
        if name in ("auto", "cuda") and device.type == "cuda":
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, model: nn.Module) -> nn.Module:
        if not self.active:
            return model
        ids = [self.local_rank] if next(model.parameters()).is_cuda else None
        # The only buffer is the constant sinusoidal table: no need to re-broadcast it every forward.
        ddp = nn.parallel.DistributedDataParallel
        sync = ({"forward_sync_buffers": False} if "forward_sync_buffers" in inspect.signature(ddp).parameters
                else {"broadcast_buffers": False})       # the older name (deprecated from torch 2.13)
        return ddp(model, device_ids=ids, **sync)

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def all_sum(self, values: list[float], device: torch.device) -> list[float]:
        """Sum a few numbers over ranks, so every rank takes the same decisions (stop, NaN) together."""
        if not self.active:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=device)               # [n]
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def weight_spread(self, model: nn.Module) -> float:
        """Largest difference of any weight between ranks (0.0 when DDP keeps them identical)."""
        if not self.active:
            return 0.0
        flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])  # [P]
        hi, lo = flat.clone(), flat.clone()
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        return float((hi - lo).abs().max())

    def cleanup(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()
