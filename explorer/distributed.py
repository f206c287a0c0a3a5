"""DistributedDataParallel when launched by torchrun; a no-op otherwise.

`torchrun --nproc-per-node N -m explorer.train ...` sets RANK/WORLD_SIZE; each rank trains on its
shard of every epoch's batches and rank 0 alone writes the run directory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "Dist":
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if not dist.is_initialized():
            dist.init_process_group(backend=backend)
        return cls(rank=rank, world=world, local_rank=local)

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, name: str) -> torch.device:
        if name in ("auto", "cuda") and torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu" if name == "auto" else name)

    def wrap(self, model: nn.Module) -> nn.Module:
        if not self.active:
            return model
        ids = [self.local_rank] if next(model.parameters()).is_cuda else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def cleanup(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()
