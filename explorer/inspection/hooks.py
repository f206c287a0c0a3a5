"""Capture points by glob pattern, scoped by a context manager.

    with capture(model, ["decoder.layers.*.cross_attn.weights"]) as trace:
        model(src, tgt_in)
    trace.arrays["decoder.layers.0.cross_attn.weights"]   # numpy [B, H, T, S]

Hooks exist only inside `capture()`, which removes them in `finally`. Every hook belongs to the
thread that opened the block (its `owner`): it records or edits only that thread's calls, and
model.layers.hooked() counts it only for that thread, so several users' captures and ablations run on
one shared model at once, each computing exactly what it would compute alone (no global lock: a user
never waits for another's capture). `intervene()` uses the same mechanism to *replace* a tensor
(e.g. zero chosen heads).
"""
from __future__ import annotations

import fnmatch
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch
from torch import nn

from explorer.model.layers import CapturePoint
from explorer.inspection.trace import Trace, attention_name

def capture_points(model: nn.Module) -> list[str]:
    """Every capture name of the model, in module order."""
    return [name for name, m in model.named_modules() if isinstance(m, CapturePoint)]


def match(model: nn.Module, patterns: str | Iterable[str]) -> list[str]:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    names = [n for n in capture_points(model) if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    if not names:
        raise ValueError(f"no capture point matches {patterns}")
    return names


@contextmanager
def _hooked(model: nn.Module, names: list[str], make_hook: Callable[[str], Callable]) -> Iterator[None]:
    modules = dict(model.named_modules())
    owner = threading.get_ident()
    handles = []
    try:
        for name in names:
            hook = make_hook(name)

            def guarded(module, inputs, output, _hook=hook):
                if threading.get_ident() == owner:
                    return _hook(output)
                return None

            guarded.owner = owner                 # read by model.layers.hooked(): whose computation it watches
            handles.append(modules[name].register_forward_hook(guarded))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def capture(model: nn.Module, patterns: str | Iterable[str] = "*") -> Iterator[Trace]:
    """Record the matching capture points during the block; yields the Trace being filled.

    If a point is hit more than once (e.g. step by step decoding), the last call wins.
    """
    trace = Trace(arrays={}, meta={"patterns": list([patterns] if isinstance(patterns, str) else patterns)})

    def make_hook(name: str):
        def record(output: torch.Tensor):
            # .copy(): .numpy() of a CPU tensor shares memory, and some outputs are views of the
            # model's own buffers (embed.positions is a slice of the PE table / learned weights),
            # so without it editing a trace array would edit the shared model.
            trace.arrays[name] = output.detach().float().cpu().numpy().copy()
        return record

    with _hooked(model, match(model, patterns), make_hook):
        yield trace


@contextmanager
def intervene(model: nn.Module, edits: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> Iterator[None]:
    """Replace capture-point outputs with `edits[name](tensor)` during the block."""
    for name in edits:
        match(model, name)
    with _hooked(model, list(edits), lambda name: edits[name]):
        yield


def ablate_heads(model: nn.Module, heads: Iterable[tuple[str, int, int]]):
    """Context manager zeroing heads given as (kind, layer, head), kind in encoder/decoder/cross."""
    by_point: dict[str, list[int]] = {}
    for kind, layer, head in heads:
        by_point.setdefault(attention_name(kind, layer, "context"), []).append(head)

    def zero(head_ids: list[int]):
        def edit(context: torch.Tensor) -> torch.Tensor:                      # [B, H, q, dh]
            keep = torch.ones(context.shape[1], device=context.device, dtype=context.dtype)
            keep[head_ids] = 0
            return context * keep.view(1, -1, 1, 1)                            # [B, H, q, dh]
        return edit

    return intervene(model, {name: zero(ids) for name, ids in by_point.items()})
