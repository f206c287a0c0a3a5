"""Trace: what one forward pass showed, as plain numpy arrays keyed by capture name.

Frozen and picklable, so st.cache_data can copy it and a JSON bundle can be written from it;
no torch objects inside.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ATTENTION_KINDS = {
    "encoder": "encoder.layers.{layer}.self_attn",
    "decoder": "decoder.layers.{layer}.self_attn",
    "cross": "decoder.layers.{layer}.cross_attn",
}


def attention_name(kind: str, layer: int, quantity: str = "weights") -> str:
    """`attention_name("cross", 1)` -> "decoder.layers.1.cross_attn.weights" (0-based layer)."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {sorted(ATTENTION_KINDS)}, not {kind!r}")
    return ATTENTION_KINDS[kind].format(layer=layer) + "." + quantity


@dataclass(frozen=True)
class Trace:
    arrays: dict[str, np.ndarray]
    src_tokens: list[str] = field(default_factory=list)
    tgt_tokens: list[str] = field(default_factory=list)   # decoder inputs: BOS + output[:-1]
    meta: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.arrays)

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise KeyError(f"{name!r} was not captured; captured: {self.names()[:8]}...") from None

    def attention(self, kind: str, layer: int, quantity: str = "weights") -> np.ndarray:
        """[B, H, q, k] weights (or scores) of one layer of one attention kind."""
        return self[attention_name(kind, layer, quantity)]

    def n_layers(self, kind: str) -> int:
        stack = "encoder" if kind == "encoder" else "decoder"
        return len({n.split(".")[2] for n in self.arrays if n.startswith(stack + ".layers.")})
