"""The decoder stack and generator as plain tensor functions, for decoding that nobody watches.

A decoding step feeds one token per hypothesis ([5, 1, 256] for beam 5): the matrix products are
tiny, so the ~25 nn.Module calls per layer (capture points, residual blocks, dropout in eval,
hook checks, a weight concatenation per fused projection) cost about as much as the arithmetic.
`PlainDecoder` runs the same arithmetic, the functions of model/functional.py that the modules
call, with products of its own (`_product`): no module calls, the fused weights concatenated once
per model, not per step, and each product in the faster of two forms for its row count (on an
input-major copy [in, out], or as (W x^T)^T on the output-major weight; up to 1.7x apart for
the 5 rows of a beam). All that is its own is those products and the capture points it leaves out. It is used only when it cannot change what anybody sees:
`Transformer.decoding_watched()` is False (eval mode, no hook anywhere in the decoder or
generator; capture() and ablation register hooks, so they get the module path, whose capture
points they need). Its log-probs equal the module path's within float rounding
(tests/test_plain_decoder.py); the cache it fills is the same DecoderCache.
"""
from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from explorer.model import functional as fn
from explorer.model.transformer import DecoderCache, Transformer

Product = fn.Map                                    # x [..., in] -> [..., out]

# Row counts for which a product is computed as (W x^T)^T on the output-major weight [out, in]
# rather than as x W_t on an input-major copy [in, out]. MKL picks its kernel by the shapes, and
# for a few rows neither form is best throughout (1 thread, AMD EPYC, MKL 2024.2; ms per product):
#   rows                                         1      2      4      5      8
#   output projection [512 -> 58101]  x W_t    4.3    8.6   10.2   11.8   12.8
#                                     W x^T    7.8    4.9    6.4    8.6   12.8
#   a base decoder step's 36 others   x W_t    4.1    5.7    7.6    8.7    9.3
#                                     W x^T    5.4    4.2    6.7    8.1   10.6
# A beam of 5 for one sentence feeds 5 rows a step, greedy decoding 1: both get their faster form.
# The two forms round differently (by ~1e-6 relative), as any two kernels do.
FEW_ROWS = range(2, 6)


def _product(*linears: nn.Linear) -> Product:
    """The product x W^T + b of one or more projections side by side, in the faster of two forms.

    `weight` [out, in] is the model's own (detached, not copied) when there is one projection,
    else the concatenation; `weight_t` [in, out] is an input-major copy, which streams the
    weights in the order x W_t reads them. Which form a call takes depends only on its row count
    (FEW_ROWS). A closure, not an object: a decoding step makes ~40 of these calls, and closure
    variables are the cheapest to read. A projection without bias (the generator's, unless
    final_logits_bias) gets none.
    """
    weight = torch.cat([m.weight for m in linears]) if len(linears) > 1 else linears[0].weight.detach()  # [n*out, in]
    weight_t = weight.t().contiguous()                                         # [in, n*out]
    bias = None if linears[0].bias is None else torch.cat([m.bias for m in linears])  # [n*out] or None
    bias_column = None if bias is None else bias.unsqueeze(1)                  # [n*out, 1]
    width = weight.shape[0]

    def product(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])                                       # [N, in]
        if flat.shape[0] in FEW_ROWS:
            flat = weight @ flat.t() if bias is None else torch.addmm(bias_column, weight, flat.t())  # [n*out, N]
            flat = flat.t().contiguous()                                        # [N, n*out]
        else:
            flat = flat @ weight_t if bias is None else torch.addmm(bias, flat, weight_t)  # [N, n*out]
        return flat.view(*x.shape[:-1], width)                                  # [..., n*out]
    return product


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
    copy of the decoder's and generator's weights in memory (input-major), and two of the fused
    projections (q|k|v and the memory's k|v).
    """
    if not isinstance(model, Transformer) or model.decoding_watched():
        return None
    return plain_decoder_of(model)


def plain_decoder_of(model: Transformer) -> "PlainDecoder":
    """The model's PlainDecoder (kept, rebuilt after a parameter changed), for a caller that has
    made sure `model.decoding_watched()` is False."""
    signature = _signature(model)
    built = _BUILT.get(model)
    if built is None or built[0] != signature:
        with torch.no_grad():
            built = (signature, PlainDecoder(model))
        _BUILT[model] = built
    return built[1]


class PlainDecoder:
    """`decode()` + `generator()` of a Transformer without module calls (eval mode, no hooks).

    It holds input-major copies and fused concatenations of the parameters as they were when it
    was built, and reads the unfused output-major weights in place, so after a parameter changes
    an old one would mix old and new values: get it from `plain_decoder_for` (or
    `plain_decoder_of`), which rebuilds it after any parameter changes.
    """

    def __init__(self, model: Transformer):
        dec = model.decoder
        self.n_heads = model.cfg.n_heads
        self.lookup = partial(F.embedding, weight=dec.embed.lookup.weight)      # ids [B, T] -> [B, T, d]
        self.table, self.scale = dec.embed.table, dec.embed.scale               # [L, d], sqrt(d)
        self.final_norm = fn.layer_norm(dec.norm) if isinstance(dec.norm, nn.LayerNorm) else fn.identity
        self.vocab = _product(model.generator.proj)                          # [d] -> [V]
        self.layers = [_Layer(self_qkv=_product(l.self_attn.w_q, l.self_attn.w_k, l.self_attn.w_v),
                              self_out=_product(l.self_attn.w_o), cross_q=_product(l.cross_attn.w_q),
                              cross_kv=_product(l.cross_attn.w_k, l.cross_attn.w_v),
                              cross_out=_product(l.cross_attn.w_o),
                              ffn=partial(fn.feed_forward, w_1=_product(l.ffn.w_1), w_2=_product(l.ffn.w_2),
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
