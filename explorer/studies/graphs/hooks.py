"""Forward hooks on named modules for the length of a block, each answering only the thread that opened
it: the replacement model edits LayerNorms and FFNs, which are modules and not capture points, so
explorer.inspection.hooks.intervene (capture points only, output only) cannot reach them.

A hook is `hook(module, args, output) -> replacement or None`. The thread guard and the `owner` mark are
what inspection.hooks gives its own hooks: model.layers.hooked() then counts a hook only for its own
thread, so another user of a shared model keeps the fused attention path and the plain decoder, and
never sees a frozen pattern. Removed in `finally`, so none outlives its block.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from torch import nn

Hook = Callable[[nn.Module, tuple, object], object]


@contextmanager
def hooked(model: nn.Module, hooks: dict[str, Hook]) -> Iterator[None]:
    """Within the block, hooks[name] runs after module `name` of `model` (in the opening thread only)."""
    modules = dict(model.named_modules())
    missing = [name for name in hooks if name not in modules]
    if missing:
        raise ValueError(f"no module {missing[0]!r} in this model")
    owner = threading.get_ident()
    handles = []
    try:
        for name, hook in hooks.items():
            def guarded(module, args, output, _hook=hook):
                return _hook(module, args, output) if threading.get_ident() == owner else None
            guarded.owner = owner
            handles.append(modules[name].register_forward_hook(guarded))
        yield
    finally:
        for handle in handles:
            handle.remove()
