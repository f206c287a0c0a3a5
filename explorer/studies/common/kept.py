"""Activations kept as tensors during a forward: what the lenses and patching read back.

`capture()` copies each capture point to numpy (float32, for display and JSON); the lenses and
patching feed activations back into the model, so they keep the tensors themselves, in the model's
dtype and on its device: no round trip through numpy, so "the last layer through the lens" is the
model's own computation bit for bit. The edits are `intervene()`'s, which leaves each tensor as it
is: hooks inside the block only, for the calling thread only (explorer.inspection.hooks).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
from torch import nn

from explorer.inspection.hooks import intervene


@contextmanager
def kept(model: nn.Module, names: Iterable[str]) -> Iterator[dict[str, torch.Tensor]]:
    """Inside the block, the latest output of each named capture point, by name (not copied: the
    model never writes into them in place)."""
    found: dict[str, torch.Tensor] = {}

    def keeper(name: str):
        def edit(tensor: torch.Tensor) -> torch.Tensor:
            found[name] = tensor
            return tensor
        return edit

    with intervene(model, {name: keeper(name) for name in names}):
        yield found


def encoder_outputs(model: nn.Module) -> list[str]:
    """The encoder's output at each depth, by capture name: 0 = the embeddings (`encoder.embed.out`),
    k = encoder layer k's output (`encoder.layers.{k-1}.resid_post`)."""
    return ["encoder.embed.out"] + [f"encoder.layers.{i}.resid_post" for i in range(model.cfg.n_encoder_layers)]


def decoder_outputs(model: nn.Module) -> list[str]:
    """The decoder's output at each depth, by capture name: 0 = the embeddings, k = decoder layer k's."""
    return ["decoder.embed.out"] + [f"decoder.layers.{i}.resid_post" for i in range(model.cfg.n_decoder_layers)]


def layer_label(layer: int) -> str:
    """What the lenses and patching call encoder depth `layer`: "embeddings", then "layer 1" ... (1-based
    like the app)."""
    return "embeddings" if layer == 0 else f"layer {layer}"
