"""One head's attention for one query, written out in the live model's numbers (the Architecture page).

q.k for each key, / sqrt(d_k), softmax, the weighted sum of V; then the heads concatenated and
projected by W^O (= the captured attention `out`). Q, K and V are not capture points, so they are
recomputed by the layer's own w_q / w_k / w_v applied to the sublayer's input, rebuilt from captured
tensors by worked.layer_stream. The explicit dot products and softmax are the only formulas written
out again, on purpose, and every result carries the captured value it must equal
(tests/unit/test_worked.py holds them to it within float32 rounding of the sums involved).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from explorer.inspection.trace import Trace, attention_kind
from explorer.inspection.worked import check_index, encoder_memory, layer_stream, max_diff, to_numpy, to_tensor
from explorer.model import functional as fn


@dataclass(frozen=True)
class AttentionWorked:
    """One head, one query: softmax(q.K^T / sqrt(d_k), masked) V, every step in numbers."""

    kind: str                   # "encoder" | "decoder" | "cross" (explorer.inspection.trace)
    layer: int                  # 0-based
    head: int                   # 0-based
    query: int                  # the query's position
    query_token: str
    key_tokens: list[str]
    q: np.ndarray               # [dh]
    k: np.ndarray               # [keys, dh]
    v: np.ndarray               # [keys, dh]
    dots: np.ndarray            # q.k_j                                   [keys]
    d_k: int
    scores: np.ndarray          # dots / sqrt(d_k); -inf where masked     [keys]
    masked: np.ndarray          # bool: key after the query (decoder self-attention)  [keys]
    weights: np.ndarray         # softmax(scores)                         [keys]
    context: np.ndarray         # sum_j weights_j v_j                     [dh]
    captured_scores: np.ndarray   # `scores` capture point, this row      [keys]
    captured_weights: np.ndarray  # `weights`                              [keys]
    captured_context: np.ndarray  # `context`, this head and query         [dh]

    @property
    def sqrt_d_k(self) -> float:
        return math.sqrt(self.d_k)

    @property
    def errors(self) -> dict[str, float]:
        """Largest |recomputed - captured| of the unmasked scores, the weights and the context."""
        open_ = ~self.masked
        return {"scores": max_diff(self.scores[open_], self.captured_scores[open_]),
                "weights": max_diff(self.weights, self.captured_weights),
                "context": max_diff(self.context, self.captured_context)}


@torch.inference_mode()
def head_qkv(model: nn.Module, trace: Trace, kind: str, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q [H, q, dh], K [H, k, dh], V [H, k, dh] of one attention layer: the layer's own projections
    of the sublayer's input (queries) and of that input or the encoder's memory (keys and values)."""
    spec = attention_kind(kind)
    check_index(layer, spec.n_layers(model.cfg), "layer")
    stream = layer_stream(model, trace, spec.stack, layer)
    x = stream.inputs[spec.block]                                               # [q, d]
    memory = encoder_memory(model, trace) if spec.block == "cross_attn" else x  # [k, d]
    attn = getattr(getattr(model, spec.stack).layers[layer], spec.block)
    heads = model.cfg.n_heads
    q = fn.split_heads(attn.w_q(x).unsqueeze(0), heads)[0]                      # [H, q, dh]
    k = fn.split_heads(attn.w_k(memory).unsqueeze(0), heads)[0]                 # [H, k, dh]
    v = fn.split_heads(attn.w_v(memory).unsqueeze(0), heads)[0]                 # [H, k, dh]
    return to_numpy(q), to_numpy(k), to_numpy(v)


def worked_attention(model: nn.Module, trace: Trace, kind: str, layer: int, head: int, query: int) -> AttentionWorked:
    """The arithmetic of head `head` (0-based) at query position `query`, with the captured values beside it."""
    spec = attention_kind(kind)
    q, k, v = head_qkv(model, trace, kind, layer)                               # [H, q, dh], [H, k, dh] x 2
    check_index(head, q.shape[0], "head")
    check_index(query, q.shape[1], "query")
    q_tokens, k_tokens = trace.axes(kind)
    q_h, k_h, v_h = q[head, query], k[head], v[head]                            # [dh], [k, dh], [k, dh]
    d_k = q_h.shape[0]
    dots = k_h @ q_h                                                            # [k]
    keys = np.arange(k_h.shape[0])                                              # [k]
    masked = keys > query if spec.causal else np.zeros(k_h.shape[0], dtype=bool)
    scores = np.where(masked, -np.inf, dots / math.sqrt(d_k))                   # [k]
    shifted = np.exp(scores - scores[~masked].max())                            # [k], 0 where masked
    weights = shifted / shifted.sum()                                           # [k]
    context = weights @ v_h                                                     # [dh]
    name = spec.capture_name(layer, "{}")
    return AttentionWorked(kind=kind, layer=layer, head=head, query=query, query_token=q_tokens[query],
                           key_tokens=list(k_tokens), q=q_h, k=k_h, v=v_h, dots=dots, d_k=d_k, scores=scores,
                           masked=masked, weights=weights, context=context,
                           captured_scores=trace[name.format("scores")][0, head, query].astype(np.float64),
                           captured_weights=trace[name.format("weights")][0, head, query].astype(np.float64),
                           captured_context=trace[name.format("context")][0, head, query].astype(np.float64))


@dataclass(frozen=True)
class HeadsOutput:
    """Concat(head_1 .. head_H) W^O + b at one query position."""

    kind: str
    layer: int
    query: int
    concat: np.ndarray          # the captured contexts side by side              [H * dh]
    projected: np.ndarray       # concat W_O^T + b, recomputed                    [d]
    contributions: np.ndarray   # each head's share: context_h W_O[:, h]^T       [H, d]
    bias: np.ndarray            # b_O                                             [d]
    captured_out: np.ndarray    # the attention's `out` capture point             [d]

    @property
    def error(self) -> float:
        return max_diff(self.projected, self.captured_out)

    @property
    def head_norms(self) -> np.ndarray:
        return np.linalg.norm(self.contributions, axis=1)                      # [H]


@torch.inference_mode()
def heads_output(model: nn.Module, trace: Trace, kind: str, layer: int, query: int) -> HeadsOutput:
    """The heads' contexts (captured) concatenated and projected by the layer's own W^O."""
    spec = attention_kind(kind)
    check_index(layer, spec.n_layers(model.cfg), "layer")
    context = trace[spec.capture_name(layer, "context")][:, :, query:query + 1]   # [1, H, 1, dh]
    check_index(query, trace[spec.capture_name(layer, "context")].shape[2], "query")
    concat = fn.merge_heads(to_tensor(context, model))[0, 0]                      # [H * dh]
    w_o = getattr(getattr(model, spec.stack).layers[layer], spec.block).w_o
    heads, d_head = context.shape[1], context.shape[3]
    weight = to_numpy(w_o.weight).reshape(-1, heads, d_head)                      # [d, H, dh]
    contributions = np.einsum("hd,ohd->ho", context[0, :, 0].astype(np.float64), weight)  # [H, d]
    return HeadsOutput(kind=kind, layer=layer, query=query, concat=to_numpy(concat), projected=to_numpy(w_o(concat)),
                       contributions=contributions, bias=to_numpy(w_o.bias),
                       captured_out=trace[spec.capture_name(layer, "out")][0, query].astype(np.float64))
