"""The Transformer's arithmetic, every formula once, as plain functions of tensors and callables.

Two callers run these formulas. The modules (layers.py, transformer.py) pass their own submodules
as the callables: nn.Linear products, LayerNorm, Dropout and the `CapturePoint`s, so every named
quantity passes through its capture point exactly where hooks expect it. The plain decoding path
(plain_decoder.py) passes products on its re-laid-out weights and leaves the capture points at
`identity`. A new model option (an activation, a positional layout, an embedding scale, a logits
bias) is therefore made here, or in the parameters both callers read, and decoding cannot silently
keep the old arithmetic.

Only the weight layout is the callers' own: which matrix product computes q, k, v (separate or
fused, output-major or input-major) and which LayerNorm module holds the gain.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from explorer.config.checks import ACTIVATION_NAMES, PE_FREQUENCIES, PE_LAYOUTS

Tensor = torch.Tensor
Map = Callable[[Tensor], Tensor]          # a product, a norm, a dropout or a capture point
Block = Callable[[Tensor, Map], Tensor]   # a residual block: (x, sublayer) -> x + sublayer(...)


def identity(x: Tensor) -> Tensor:
    """The capture point or dropout of a caller that has none (the plain path, eval mode)."""
    return x


# The position-wise FFN's non-linearity by name (ModelConfig.activation): the one place an
# activation is chosen, so the modules and the plain path cannot disagree about it.
#   relu   max(0, x)                  the paper's
#   swish  x * sigmoid(x) (= SiLU)    Marian / OPUS-MT
#   gelu   x * Phi(x), exact (erf)    as Hugging Face's "gelu"
ACTIVATIONS: dict[str, Map] = {"relu": torch.relu, "swish": F.silu, "gelu": F.gelu}
assert tuple(ACTIVATIONS) == ACTIVATION_NAMES, "config.checks.ACTIVATION_NAMES and ACTIVATIONS must agree"


def check_activation(name: str) -> str:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(sorted(ACTIVATIONS))}, not {name!r}")
    return name


# ------------------------------------------------------------------------------ embeddings

def embedding_scale(d_model: int, scaled: bool = True) -> float:
    """What token vectors are multiplied by: sqrt(d_model) (the paper's), or 1 when unscaled."""
    return math.sqrt(d_model) if scaled else 1.0


def sinusoid_frequencies(d_model: int, base: float = 10000.0, kind: str = "paper") -> Tensor:
    """The angular frequency of sinusoid i (float64), i = 0 .. ceil(d/2) - 1:

    "paper"    1 / base^(2i/d)            (the paper; Marian)
    "fairseq"  1 / base^(i/(d/2 - 1))     (tensor2tensor's, fairseq's, M2M100's and NLLB's: the last
                                           pair's frequency is exactly 1/base; needs an even d >= 4)
    """
    if kind not in PE_FREQUENCIES:
        raise ValueError(f"pe_frequencies must be one of {', '.join(PE_FREQUENCIES)}, not {kind!r}")
    if kind == "fairseq":
        return _fairseq_frequencies(d_model, base).double()                     # [d/2]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                   # [ceil(d/2)]
    return 1.0 / base ** (two_i / d_model)


def _fairseq_frequencies(d_model: int, base: float) -> Tensor:
    """exp(-i * log(base) / (d/2 - 1)) in float32, computed as fairseq and M2M100 compute it."""
    half = d_model // 2
    return torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(base) / (half - 1)))  # [d/2]


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0, layout: str = "interleaved",
                     frequencies: str = "paper", offset: int = 0) -> Tensor:
    """The sinusoidal positional rows [max_len, d_model] float32; angle(pos, i) = (pos + offset) * freq_i.

    "interleaved" (the paper): PE(pos, 2i) = sin(angle), PE(pos, 2i+1) = cos(angle).
    "halves" (Marian, M2M100): [sin(angle(pos, i)) for every i | cos(angle(pos, i)) for every i], the
    same frequencies; an odd d has one more sine than cosine in either layout. `frequencies`:
    sinusoid_frequencies' kind. `offset`: the sinusoid index of position 0 (M2M100 and NLLB number
    positions from padding_idx + 1, fairseq's make_positions), so row p holds index p + offset.
    """
    if layout not in PE_LAYOUTS:
        raise ValueError(f"pe_layout must be one of {', '.join(PE_LAYOUTS)}, not {layout!r}")
    if frequencies == "fairseq":
        # in float32 and in fairseq's order of operations, as the models were trained with it: float64
        # would move a row by up to ~1e-4 at position 1000
        angle32 = torch.arange(offset, offset + max_len, dtype=torch.int64).float().unsqueeze(1) \
            * _fairseq_frequencies(d_model, base).unsqueeze(0)                # [L, d/2]
        parts = (torch.sin(angle32), torch.cos(angle32))                       # 2 x [L, d/2]
        if layout == "halves":
            return torch.cat(parts, dim=1)                                     # [L, d]
        return torch.stack(parts, dim=2).reshape(max_len, d_model)            # [L, d] sin, cos, sin, ...
    position = torch.arange(offset, offset + max_len, dtype=torch.float64).unsqueeze(1)   # [L, 1]
    angle = position * sinusoid_frequencies(d_model, base, frequencies)        # [L, ceil(d/2)]
    sin, cos = torch.sin(angle), torch.cos(angle[:, : d_model // 2])           # [L, ceil(d/2)], [L, floor(d/2)]
    if layout == "halves":
        return torch.cat([sin, cos], dim=1).float()                            # [L, d]
    table = torch.zeros(max_len, d_model, dtype=torch.float64)                 # [L, d]
    table[:, 0::2] = sin
    table[:, 1::2] = cos
    return table.float()


def token_vectors(ids: Tensor, lookup: Map, scale: float) -> Tensor:
    """The token summand of an embedding: looked-up vectors times `scale` (the `tokens` capture point's
    value, and what gradient attributions take as their input)."""
    return lookup(ids) * scale                                                  # [B, T, d]


def embed(ids: Tensor, lookup: Map, table: Tensor, offset: int, scale: float,
          tokens: Map = identity, positions: Map = identity, dropout: Map = identity) -> Tensor:
    """Token vectors times `scale` (embedding_scale: sqrt(d_model) or 1) plus the positional rows.

    `table` [max_len, d] holds a row per position (sinusoidal or learned); `offset` is the first
    position, so one new token after a cached prefix of n gets row n. `tokens`/`positions` are the
    capture points of the two summands (the positions expanded to [B, T, d] so a capture sees one
    row per token); dropout comes before the caller's `out` capture point.
    """
    batch, length = ids.shape                                                   # ids [B, T]
    if offset + length > table.shape[0]:
        raise ValueError(f"sequence of {offset + length} positions exceeds max_len={table.shape[0]}")
    tok = tokens(token_vectors(ids, lookup, scale))                             # [B, T, d]
    pos = positions(table[offset:offset + length].unsqueeze(0).expand(batch, -1, -1))  # [B, T, d]
    return dropout(tok + pos)                                                   # [B, T, d]


# ------------------------------------------------------------------------------- attention

def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """[B, T, H * dh] -> [B, H, T, dh]: head h reads features h*dh .. (h+1)*dh - 1."""
    batch, length, _ = x.shape                                                  # x [B, T, d]
    return x.view(batch, length, n_heads, -1).transpose(1, 2)                   # [B, H, T, dh]


def merge_heads(context: Tensor) -> Tensor:
    """[B, H, T, dh] -> [B, T, H * dh], the inverse of split_heads (heads side by side)."""
    batch, heads, length, d_head = context.shape                                # [B, H, T, dh]
    return context.transpose(1, 2).reshape(batch, length, heads * d_head)       # [B, T, d]


def split_product(product: Tensor, n_parts: int, n_heads: int) -> tuple[Tensor, ...]:
    """A fused product [B, T, n * d] (q|k|v or k|v side by side) -> n tensors [B, H, T, dh], the
    views split_heads would make of each part. Three torch calls instead of 1 + 2n: a decoding step
    is thousands of small calls, and each one hands Python's GIL to another computing thread."""
    batch, length, _ = product.shape                                            # [B, T, n*d]
    parts = product.view(batch, length, n_parts, n_heads, -1)                   # [B, T, n, H, dh]
    return parts.permute(2, 0, 3, 1, 4).unbind(0)                               # n x [B, H, T, dh]


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float = 0.0,
           watch: tuple[Map, Map] | None = None) -> Tensor:
    """softmax(q k^T / sqrt(d_head), masked) v, per head: [B, H, q, dh] -> [B, H, q, dh].

    `mask` is bool, True = may attend, broadcastable to [B, H, q, k]. Unwatched, the fused
    `scaled_dot_product_attention` kernel computes it without materialising the weights. `watch`
    = (scores, weights) capture points: then scores (after the mask, before softmax) and weights
    (after softmax, before dropout) are computed explicitly and pass through them, so they exist
    to be seen (and may be replaced). `dropout_p` is the training-mode rate (0 in eval).
    """
    if watch is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # [B, H, q, dh]
    capture_scores, capture_weights = watch
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])                   # [B, H, q, k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = capture_weights(torch.softmax(capture_scores(scores), dim=-1))   # [B, H, q, k]
    if dropout_p:
        weights = F.dropout(weights, dropout_p)
    return weights @ v                                                          # [B, H, q, dh]


def append_kv(cache: dict | None, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Self-attention keys/values so far: the cached ones (earlier tokens) then the new ones.

    `cache` (one layer's "self" dict of a DecoderCache, None uncached) keeps the result for the
    next step, so a step costs one token's projections, not the whole prefix's.
    """
    if cache is None:
        return k, v
    if "k" in cache:
        k = torch.cat([cache["k"], k], dim=2)                                   # [B, H, k_old+k_new, dh]
        v = torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    return k, v


def memory_kv(cache: dict | None, project: Callable[[], tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    """Cross-attention keys/values of the encoder memory: `project()` once per decode, then kept.

    The memory does not change between steps, so the cache ("cross" dict) holds its projection.
    """
    if cache is None:
        return project()
    if "k" not in cache:
        cache["k"], cache["v"] = project()                                      # 2 x [B, H, S, dh]
    return cache["k"], cache["v"]


def self_attention(x: Tensor, qkv: Map, out: Map, n_heads: int, mask: Tensor | None,
                   cache: dict | None = None, dropout_p: float = 0.0, watch: tuple[Map, Map] | None = None,
                   context: Map = identity) -> Tensor:
    """Multi-head self-attention: x [B, T, d] -> [B, T, d]; `mask` causal in the decoder.

    `qkv` is the fused product [B, T, 3d] (q | k | v side by side), `out` the output projection;
    `context` the per-head capture point [B, H, T, dh] (head ablation replaces it there).
    """
    q, k, v = split_product(qkv(x), 3, n_heads)                                 # 3 x [B, H, T, dh]
    k, v = append_kv(cache, k, v)                                               # 2 x [B, H, k, dh]
    return out(merge_heads(context(attend(q, k, v, mask, dropout_p, watch))))   # [B, T, d]


def cross_attention(x: Tensor, memory: Tensor, query: Map, kv: Map, out: Map, n_heads: int,
                    mask: Tensor | None, cache: dict | None = None, dropout_p: float = 0.0,
                    watch: tuple[Map, Map] | None = None, context: Map = identity) -> Tensor:
    """Multi-head attention of x [B, T, d] over the encoder's memory [B, S, d] -> [B, T, d].

    `query` projects x; `kv` is the fused product of the memory [B, S, 2d] (k | v), run once per
    decode when `cache` is given; `mask` hides the source's padding.
    """
    q = split_heads(query(x), n_heads)                                          # [B, H, T, dh]
    k, v = memory_kv(cache, lambda: tuple(split_product(kv(memory), 2, n_heads)))  # 2 x [B, H, S, dh]
    return out(merge_heads(context(attend(q, k, v, mask, dropout_p, watch))))   # [B, T, d]


def causal_mask(length: int, offset: int, device: torch.device) -> Tensor | None:
    """Bool mask, True where query i (absolute offset+i) may see key j: j <= offset+i.

    One new token after a cached prefix sees everything, so no mask is needed then.
    """
    if length == 1:
        return None
    q = torch.arange(offset, offset + length, device=device).unsqueeze(1)     # [T, 1]
    k = torch.arange(offset + length, device=device).unsqueeze(0)             # [1, offset+T]
    return (k <= q).view(1, 1, length, offset + length)                       # [1, 1, T, offset+T]


# ------------------------------------------------------------------- blocks, FFN, generator

def layer_norm(norm: torch.nn.LayerNorm) -> Map:
    """`norm` as a plain function x [..., d] -> [..., d]: the module's own formula (F.layer_norm)
    with its gain, bias and eps bound once, for a caller that makes no module calls."""
    return partial(torch.layer_norm, normalized_shape=norm.normalized_shape, weight=norm.weight, bias=norm.bias,
                   eps=norm.eps)                   # what F.layer_norm calls, without its per-call checks


def layer_norm_scale(x: Tensor, eps: float) -> Tensor:
    """What LayerNorm divides by: sqrt(Var[x] + eps) over the last dimension (biased variance)."""
    return torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)              # [..., 1]


def scaled_layer_norm(x: Tensor, scale: Tensor, norm: torch.nn.LayerNorm) -> Tensor:
    """LayerNorm with its divisor given: (x - mean(x)) / scale * gain + bias. With scale =
    layer_norm_scale(x, norm.eps) it is `norm(x)`; with a scale held fixed (an attribution graph's
    frozen normalisation) it is affine in x, centring included."""
    return (x - x.mean(-1, keepdim=True)) / scale * norm.weight + norm.bias        # [..., d]


def residual(x: Tensor, sublayer: Map, norm: Map, norm_first: bool, dropout: Map = identity) -> Tensor:
    """x + Dropout(sublayer(x)) with the norm after (post-norm, the paper) or before (pre-norm).

    Post-norm normalises the sum, so every layer's output has unit scale; pre-norm normalises only
    the sublayer's input and leaves the residual stream alone (its stack ends in one final norm).
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))                                   # [B, T, d]
    return norm(x + dropout(sublayer(x)))                                       # [B, T, d]


def feed_forward(x: Tensor, w_1: Map, w_2: Map, activation: str, hidden: Map = identity,
                 dropout: Map = identity) -> Tensor:
    """Position-wise FFN(x) = act(x W1 + b1) W2 + b2 (act = ACTIVATIONS[activation]; max(0, .) in the paper).

    `hidden` is the capture point of act(x W1 + b1) [B, T, d_ff]; dropout acts on it before W2.
    """
    return w_2(dropout(hidden(ACTIVATIONS[activation](w_1(x)))))                # [B, T, d]


def log_probs(logits: Tensor) -> Tensor:
    """Log-softmax over the vocabulary, in float32 (half-precision logits lose ranks otherwise)."""
    return torch.log_softmax(logits.float(), dim=-1)                            # [B, T, V]


# ------------------------------------------------------------------------ layers and stacks

def encoder_layer(x: Tensor, attention: Map, ffn: Map, blocks: Sequence[Block]) -> Tensor:
    """Self-attention over the source, then the FFN, each inside its residual block."""
    x = blocks[0](x, attention)                                                 # [B, S, d]
    return blocks[1](x, ffn)                                                    # [B, S, d]


def decoder_layer(y: Tensor, self_attn: Map, cross_attn: Map, ffn: Map, blocks: Sequence[Block]) -> Tensor:
    """Masked self-attention over the target so far, attention over the encoder's memory, the
    FFN; each inside its residual block (blocks[i](y, sublayer))."""
    y = blocks[0](y, self_attn)                                                 # [B, T, d]
    y = blocks[1](y, cross_attn)                                                # [B, T, d]
    return blocks[2](y, ffn)                                                    # [B, T, d]


def decoder_stack(tgt: Tensor, embed_fn: Callable[[Tensor, int], Tensor], layers: Sequence[Callable[..., Tensor]],
                  final_norm: Map, cache=None) -> Tensor:
    """Target ids [B, T] -> hidden states [B, T, d]: embed, every layer, the final norm.

    `embed_fn(ids, offset)`; `layers[i](y, causal_mask, self_cache, cross_cache)`. With a
    DecoderCache, `tgt` holds only the new tokens: their positions start at the cache's length,
    each layer's "self" dict keeps the keys/values so far and its "cross" dict the projected
    memory, and the length grows by T.
    """
    offset = cache.length if cache is not None else 0
    length = tgt.shape[1]
    y = embed_fn(tgt, offset)                                                   # [B, T, d]
    self_mask = causal_mask(length, offset, tgt.device)                         # [1, 1, T, offset+T] or None
    for i, layer in enumerate(layers):
        if cache is None:
            y = layer(y, self_mask, None, None)                                 # [B, T, d]
        else:
            kept = cache.layers[i]
            y = layer(y, self_mask, kept.setdefault("self", {}), kept.setdefault("cross", {}))  # [B, T, d]
    if cache is not None:
        cache.length += length
    return final_norm(y)                                                        # [B, T, d]
