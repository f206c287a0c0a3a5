"""Trace: what one forward pass showed, as plain numpy arrays keyed by capture name.

Frozen and picklable, so st.cache_data can copy it and a JSON bundle can be written from it;
no torch objects inside. The model's three kinds of attention are one table here (ATTENTION_KINDS):
where each is captured, what its queries and keys are, how the app names it; the pages, figures,
downloads, comparison, ablation and bertviz all read it instead of spelling kinds out again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class AttentionKind:
    """One kind of attention: which layers hold it, what attends to what, and its names."""

    name: str          # the key in URLs, ablation triples (kind, layer, head) and JSON bundles
    stack: str         # "encoder" | "decoder": whose layers hold it (and how many there are)
    block: str         # "self_attn" | "cross_attn": the block of each layer, in capture names
    queries: str       # "src" | "tgt": the tokens that ask (tgt: the decoder inputs BOS + output[:-1])
    keys: str          # "src" | "tgt": the tokens looked at
    causal: bool       # keys after the query are masked (-inf score, weight 0)
    label: str         # what the app calls it
    short: str         # a one-word name (bertviz's views)

    def capture_name(self, layer: int, quantity: str = "weights") -> str:
        """`cross.capture_name(1)` -> "decoder.layers.1.cross_attn.weights" (0-based layer)."""
        return f"{self.stack}.layers.{layer}.{self.block}.{quantity}"

    def n_layers(self, cfg) -> int:
        """How many layers of this kind a ModelConfig describes."""
        return cfg.n_encoder_layers if self.stack == "encoder" else cfg.n_decoder_layers


ATTENTION_KINDS = {kind.name: kind for kind in (
    AttentionKind("encoder", "encoder", "self_attn", "src", "src", False, "Encoder self-attention", "Encoder"),
    AttentionKind("decoder", "decoder", "self_attn", "tgt", "tgt", True, "Decoder masked self-attention", "Decoder"),
    AttentionKind("cross", "decoder", "cross_attn", "tgt", "src", False, "Cross-attention (decoder → encoder)",
                  "Cross"),
)}
KINDS = tuple(ATTENTION_KINDS)                      # ("encoder", "decoder", "cross"): the order everywhere
KIND_LABELS = {name: kind.label for name, kind in ATTENTION_KINDS.items()}


def attention_kind(kind: str) -> AttentionKind:
    """The kind named `kind`; ValueError naming the three otherwise."""
    try:
        return ATTENTION_KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"attention kind must be one of {', '.join(KINDS)}, not {kind!r}") from None


def weights_depend_on(kind: str, layer: int, other_kind: str, other_layer: int) -> bool:
    """Can the output of attention block (other_kind, other_layer) change the attention weights of block
    (kind, layer)? A block's weights are computed from what reached it, so only blocks upstream of it
    count: the encoder's earlier layers for encoder self-attention; for decoder self-attention the
    decoder's earlier layers (self and cross) and, through those cross-attentions, every encoder layer
    (not for layer 0, which reads only the target embeddings); for cross-attention the decoder's
    self-attention of the same layer and before, earlier cross-attentions and every encoder layer (its
    keys are the encoder's output). Why it matters: the difference a head ablation makes to a block
    that does not depend on the ablated heads is zero by construction, and the app says so."""
    view, other = attention_kind(kind), attention_kind(other_kind)
    if view.name == "encoder":
        return other.name == "encoder" and other_layer < layer
    if other.name == "encoder":
        return view.name == "cross" or layer >= 1
    if view.name == "decoder":
        return other_layer < layer
    return other_layer <= layer if other.name == "decoder" else other_layer < layer


def untouched_by(kind: str, layer: int, ablated: Iterable[Sequence]) -> bool:
    """True when switching off the heads `ablated` ((kind, layer, head) triples) cannot change the
    attention weights of block (kind, layer) (weights_depend_on)."""
    return not any(weights_depend_on(kind, layer, k, int(l)) for k, l, *_ in ablated)


def attention_name(kind: str, layer: int, quantity: str = "weights") -> str:
    """`attention_name("cross", 1)` -> "decoder.layers.1.cross_attn.weights" (0-based layer)."""
    return attention_kind(kind).capture_name(layer, quantity)


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
        """Layers of this kind's stack that were captured."""
        prefix = attention_kind(kind).stack + ".layers."
        return len({n.split(".")[2] for n in self.arrays if n.startswith(prefix)})

    def stack(self, kind: str, quantity: str = "weights", row: int = 0) -> np.ndarray:
        """[L, H, q, k]: every layer of one kind for batch row `row`, layer 0 first (what grids,
        statistics, comparisons, bertviz and downloads take)."""
        layers = [self.attention(kind, layer, quantity)[row] for layer in range(self.n_layers(kind))]  # [H, q, k] each
        if not layers:
            raise KeyError(f"no {kind} attention was captured")
        return np.stack(layers)                                                # [L, H, q, k]

    def axes(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of a kind: source pieces or decoder inputs, as the kind says."""
        sides = {"src": self.src_tokens, "tgt": self.tgt_tokens}
        k = attention_kind(kind)
        return sides[k.queries], sides[k.keys]
