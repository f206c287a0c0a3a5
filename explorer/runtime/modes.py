"""Eval mode for the length of a block, the mode the model was in restored after: every analysis that
runs a model someone else may be training or that the app shares (decoding, attribution, head
statistics, scores) needs dropout off and must not leave the model changed."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """model.eval() inside the block; model.train() after it if that is how it was found."""
    was_training = model.training
    if was_training:
        model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()
