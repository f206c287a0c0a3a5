"""A Transformer's structure (parameter names and shapes) for checks that never read its values.

Listing checkpoints (is this safetensors header the model its config describes?) and sizing a
training run (how many parameters?) both need the structure only.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from explorer.config import ModelConfig
from explorer.model.transformer import Transformer


class _NoInit(TorchFunctionMode):
    """Skips the in-place random/constant initialisers (normal_, uniform_, ...) of torch.nn.init.

    The skeleton's values are never read, only its names and shapes.
    """

    SKIPPED = frozenset({"normal_", "uniform_", "zero_", "fill_", "ones_", "zeros_", "constant_",
                         "xavier_uniform_", "kaiming_uniform_", "trunc_normal_"})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")          # torch.nn.init passes tensor=...
        if getattr(func, "__name__", "") in self.SKIPPED and isinstance(target, torch.Tensor):
            return target
        return func(*args, **kwargs)


def model_skeleton(cfg: ModelConfig) -> Transformer:
    """The model's structure (names and shapes), its weights left uninitialised.

    Not on the meta device: there, the first random or arange op imports torch._dynamo (its meta
    kernels are Python decompositions behind a dynamo guard), ~1.2 s of every cold app start.
    Uninitialised CPU tensors cost an allocation the OS does not even back until written.
    """
    with _NoInit():
        return Transformer(cfg)
