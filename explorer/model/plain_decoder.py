"""The decoder stack and generator as plain tensor functions, for decoding that nobody watches.

A decoding step feeds one token per hypothesis ([5, 1, 256] for beam 5): the matrix products are
tiny, so the ~25 nn.Module calls per layer (capture points, residual blocks, dropout in eval,
hook checks, a weight concatenation per fused projection) cost about as much as the arithmetic.
`PlainDecoder` runs the same arithmetic, the functions of model/functional.py that the modules
call, with products of its own (`_product`): no module calls, the fused weights concatenated once
per model, not per step, and laid out once for the fastest kernel of a few rows (oneDNN's packed
layout; about 3x MKL's speed on the 5 rows of a beam of 5). All that is its own is those products
and the capture points it leaves out. It is used only when it cannot change what anybody sees:
`Transformer.decoding_watched()` is False (eval mode, no hook anywhere in the decoder or
generator; capture() and ablation register hooks, so they get the module path, whose capture
points they need). Its log-probs equal the module path's within float rounding
(tests/test_plain_decoder.py); the cache it fills is the same DecoderCache.
"""
from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from functools import cache, partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from explorer.model import functional as fn
from explorer.model.transformer import DecoderCache, Transformer

Product = fn.Map                                    # x [..., in] -> [..., out]

# A step's products have few rows (5 for a beam of 5), so they are matrix-vector products in all
# but name, and how fast they run depends on the kernel more than on the arithmetic: ms per
# product or per step (1 thread, AMD EPYC, torch 2.13: MKL 2024.2 and oneDNN 3.12; weights
# read from memory, not cache, as in decoding):
#   rows                                          1      5     10
#   output projection 512 -> 58101  x W_t (MKL)  4.3   11.8   14.5
#                                   oneDNN       3.0    3.9    5.3
#   a base decoder step's 36 others x W_t (MKL)  4.6    9.2   10.7
#                                   oneDNN       2.9    3.6    4.3
# oneDNN's matmul on a weight packed once for it (torch.ops.mkldnn, ops torch's compiler also
# emits for frozen CPU models) computes in float32 like MKL; it rounds differently (within 1e-5
# relative), and a row's result does not depend on the other rows, nor on the thread count. The
# ops are private to torch, so they are tried once per process before use; where they fail or
# do not apply (a torch without oneDNN, other dtypes, other devices), the input-major copy is used.
PACK_ROWS_HINT = 64                  # rows oneDNN packs for; any hint of 5 or more is as fast here


def _product(*linears: nn.Linear) -> Product:
    """The product x W^T + b of one or more projections side by side (fused), in its fastest form:
    the concatenated weight packed for oneDNN where `packing_works`, else copied input-major
    ([in, out], which few rows read faster than F.linear's [out, in]).

    A closure, not an object: a decoding step makes ~40 of these calls, and closure variables are
    the cheapest to read. A projection without bias (the generator's, unless final_logits_bias)
    gets none.
    """
    weight = torch.cat([m.weight.detach() for m in linears])                   # [n*out, in]
    bias = None if linears[0].bias is None else torch.cat([m.bias.detach() for m in linears])  # [n*out] or None
    width = weight.shape[0]
    if packing_works(weight):
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS_HINT)  # [n*out, in], oneDNN's layout
        linear = torch.ops.mkldnn._linear_pointwise

        def product(x: torch.Tensor) -> torch.Tensor:
            return linear(x, packed, bias, "none", [], "")                     # [..., n*out]
        return product
    weight_t = weight.t().contiguous()                                         # [in, n*out]

    def product(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])                                       # [N, in]
        flat = flat @ weight_t if bias is None else torch.addmm(bias, flat, weight_t)  # [N, n*out]
        return flat.view(*x.shape[:-1], width)                                  # [..., n*out]
    return product


def packing_works(weight: torch.Tensor) -> bool:
    """Whether `weight`'s products can run on oneDNN's packed layout: a float32 CPU weight, and a
    torch whose oneDNN packs and multiplies (checked once per process on a small product)."""
    return (USE_PACKED and weight.dtype == torch.float32 and weight.device.type == "cpu"
            and _packing_available())


USE_PACKED = True                    # False: always the input-major copy (tests compare both forms)


@cache
def _packing_available() -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        weight = torch.linspace(-1.0, 1.0, 24 * 16).view(24, 16)              # [out, in] (no RNG draws:
        x = torch.linspace(-2.0, 2.0, 3 * 16).view(3, 16).flip(1)             # [N, in]  sampling follows)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS_HINT)
        got = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return bool(torch.allclose(got, x @ weight.t(), atol=1e-5, rtol=1e-5))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's products, fused where the module path fuses its products, and its
    residual blocks (the LayerNorms' own parameters, applied without a module call)."""

    self_qkv: Product      # [d] -> [3d]
    self_out: Product      # [d] -> [d]
    cross_q: Product       # [d] -> [d]
    cross_kv: Product      # [d] -> [2d]
    cross_out: Product     # [d] -> [d]
    ffn: fn.Map            # [d] -> [d], the whole position-wise FFN
    blocks: tuple[fn.Block, fn.Block, fn.Block]   # self, cross, ffn


def _block(norm: nn.LayerNorm, norm_first: bool) -> fn.Block:
    """A residual block as model.layers.Residual in eval mode (no dropout)."""
    return partial(fn.residual, norm=fn.layer_norm(norm), norm_first=norm_first)


_BUILT: "weakref.WeakKeyDictionary[Transformer, tuple[tuple, PlainDecoder]]" = weakref.WeakKeyDictionary()


def _signature(model: Transformer) -> tuple:
    """Changes whenever a parameter the PlainDecoder copies is replaced or written in place
    (optimizer step, load_state_dict). The encoder's are not among them."""
    copied = itertools.chain(model.decoder.parameters(), model.generator.parameters())
    return tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in copied)


def plain_decoder_for(model: nn.Module) -> "PlainDecoder | None":
    """A PlainDecoder when nothing could tell it from the module path, else None (use the modules).

    Kept per model and rebuilt only when a parameter changed, so a decode does not pay for
    re-laying-out the weights (~4 ms for `small`, 2% of a beam search); the cost is one extra
    copy of the decoder's and generator's weights in memory.
    """
    if not isinstance(model, Transformer) or model.decoding_watched():
        return getattr(model, "plain_decoder", None)          # an int8 model's own (explorer/model/int8.py)
    return plain_decoder_of(model)


def plain_decoder_of(model: Transformer) -> "PlainDecoder":
    """The model's PlainDecoder (kept, rebuilt after a parameter changed), for a caller that has
    made sure `model.decoding_watched()` is False. A model that brings its own (an int8 model) gets it."""
    own = getattr(model, "plain_decoder", None)
    if own is not None:
        return own
    signature = _signature(model)
    built = _BUILT.get(model)
    if built is None or built[0] != signature:
        with torch.no_grad():
            built = (signature, PlainDecoder(model))
        _BUILT[model] = built
    return built[1]


class PlainDecoder:
    """`decode()` + `generator()` of a Transformer without module calls (eval mode, no hooks).

    It holds re-laid-out copies of the parameters as they were when it was built: get it from
    `plain_decoder_for`, which rebuilds it after any parameter changes.
    """

    def __init__(self, model: Transformer, product: Callable[..., Product] | None = None):
        """`product` makes each (fused) projection's product from its nn.Linear modules: the float32
        `_product` by default; explorer/model/int8.py passes its int8 one."""
        make = product or _product
        dec = model.decoder
        self.n_heads = model.cfg.n_heads
        self.lookup = partial(F.embedding, weight=dec.embed.lookup.weight)      # ids [B, T] -> [B, T, d]
        self.table, self.scale = dec.embed.table, dec.embed.scale               # [L, d], sqrt(d)
        self.final_norm = fn.layer_norm(dec.norm) if isinstance(dec.norm, nn.LayerNorm) else fn.identity
        self.vocab = make(model.generator.proj)                              # [d] -> [V]
        self.layers = [_Layer(self_qkv=make(l.self_attn.w_q, l.self_attn.w_k, l.self_attn.w_v),
                              self_out=make(l.self_attn.w_o), cross_q=make(l.cross_attn.w_q),
                              cross_kv=make(l.cross_attn.w_k, l.cross_attn.w_v),
                              cross_out=make(l.cross_attn.w_o),
                              ffn=partial(fn.feed_forward, w_1=make(l.ffn.w_1), w_2=make(l.ffn.w_2),
                                          activation=l.ffn.activation),
                              blocks=tuple(_block(b.norm, b.norm_first) for b in (l.self_block, l.cross_block,
                                                                                  l.ffn_block)))
                       for l in dec.layers]

    def _embed(self, ids: torch.Tensor, offset: int) -> torch.Tensor:
        return fn.embed(ids, self.lookup, self.table, offset, self.scale)       # [B, T, d]

    def _layer(self, layer: _Layer, y: torch.Tensor, self_mask: torch.Tensor | None, self_cache: dict | None,
               cross_cache: dict | None, memory: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        """One decoder layer, as DecoderLayer.forward without its capture points."""
        heads = self.n_heads
        return fn.decoder_layer(
            y, lambda h: fn.self_attention(h, layer.self_qkv, layer.self_out, heads, self_mask, self_cache),
            lambda h: fn.cross_attention(h, memory, layer.cross_q, layer.cross_kv, layer.cross_out, heads,
                                         src_mask, cross_cache),
            layer.ffn, layer.blocks)                                            # [B, T, d]

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """Same contract as Transformer.decode: tgt [B, T] -> hidden [B, T, d]; fills `cache`."""
        layers = [partial(self._layer, layer, memory=memory, src_mask=src_mask) for layer in self.layers]
        return fn.decoder_stack(tgt, self._embed, layers, self.final_norm, cache)   # [B, T, d]

    def generator(self, hidden: torch.Tensor) -> torch.Tensor:
        """Log-probs [B, T, V], as Generator.forward."""
        return fn.log_probs(self.vocab(hidden))                                 # [B, T, V]
