"""The decoder stack and generator as plain tensor functions, for decoding that nobody watches.

A decoding step feeds one token per hypothesis ([5, 1, 256] for beam 5): the matrix products are
tiny, so the ~25 nn.Module calls per layer (capture points, residual blocks, dropout in eval,
hook checks, a weight concatenation per fused projection) cost about as much as the arithmetic.
`PlainDecoder` does the same arithmetic, in the same order, on copies of the model's parameters laid
out input-major ([in, out], which small-batch products read ~30% faster here): no module calls, the
fused weights concatenated once per model, not per step. It is used only when it cannot
change what anybody sees: the model is in eval mode and no hook is registered anywhere in the
decoder or generator (capture() and ablation register hooks, so they get the module path, whose
capture points they need). Its log-probs equal the module path's within float rounding
(tests/test_plain_decoder.py); the cache it fills is the same DecoderCache.
"""
from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as nn_module

from explorer.model.transformer import DecoderCache, Transformer, causal_mask


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's parameters: (input-major weight [in, out], bias [out]) per product,
    fused where the module path fuses its products."""

    self_qkv: tuple[torch.Tensor, torch.Tensor]      # [d, 3d], [3d]
    self_out: tuple[torch.Tensor, torch.Tensor]      # [d, d], [d]
    cross_q: tuple[torch.Tensor, torch.Tensor]       # [d, d], [d]
    cross_kv: tuple[torch.Tensor, torch.Tensor]      # [d, 2d], [2d]
    cross_out: tuple[torch.Tensor, torch.Tensor]     # [d, d], [d]
    ffn_in: tuple[torch.Tensor, torch.Tensor]        # [d, d_ff], [d_ff]
    ffn_out: tuple[torch.Tensor, torch.Tensor]       # [d_ff, d], [d]
    norms: tuple[nn.LayerNorm, nn.LayerNorm, nn.LayerNorm]   # self, cross, ffn blocks


def _fuse(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """Input-major weights [in, out] (several projections side by side) and their biases [out].

    For a few rows x [n, in], x @ W_t with W_t contiguous [in, out] streams the weights in the
    order the product reads them: ~30% faster on this CPU than F.linear's x @ W.T.
    """
    return (torch.cat([m.weight for m in linears]).t().contiguous(), torch.cat([m.bias for m in linears]))


def _linear(x: torch.Tensor, weight_bias: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """x [..., in] @ W_t [in, out] + b -> [..., out]."""
    weight, bias = weight_bias
    flat = torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight)               # [N, out]
    return flat.view(*x.shape[:-1], weight.shape[1])                          # [..., out]


def has_hooks(module: nn.Module) -> bool:
    """Any forward (pre-)hook on the module or below it, or a global one."""
    if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


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
    if not isinstance(model, Transformer) or model.training:
        return None
    if has_hooks(model.decoder) or has_hooks(model.generator):
        return None
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

    def __init__(self, model: Transformer):
        cfg = model.cfg
        dec = model.decoder
        self.n_heads, self.d_model = cfg.n_heads, cfg.d_model
        self.norm_first = cfg.norm_first
        self.lookup = dec.embed.lookup.weight                                   # [V, d]
        self.scale = math.sqrt(cfg.d_model)
        self.positions = dec.embed.position_table.weight if dec.embed.learned else dec.embed.pe  # [L, d]
        self.final_norm = dec.norm if isinstance(dec.norm, nn.LayerNorm) else None
        self.vocab = model.generator.proj.weight.t().contiguous()              # [d, V]
        self.layers = [_Layer(self_qkv=_fuse(l.self_attn.w_q, l.self_attn.w_k, l.self_attn.w_v),
                              self_out=_fuse(l.self_attn.w_o), cross_q=_fuse(l.cross_attn.w_q),
                              cross_kv=_fuse(l.cross_attn.w_k, l.cross_attn.w_v),
                              cross_out=_fuse(l.cross_attn.w_o), ffn_in=_fuse(l.ffn.w_1),
                              ffn_out=_fuse(l.ffn.w_2),
                              norms=(l.self_block.norm, l.cross_block.norm, l.ffn_block.norm))
                       for l in dec.layers]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape                                              # x [B, T, d]
        return x.view(batch, length, self.n_heads, -1).transpose(1, 2)          # [B, H, T, dh]

    def _merge(self, context: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = context.shape                                     # [B, H, T, dh]
        return context.transpose(1, 2).reshape(batch, length, self.d_model)     # [B, T, d]

    def _block(self, y: torch.Tensor, norm: nn.LayerNorm, sublayer) -> torch.Tensor:
        """Residual + LayerNorm exactly as model.layers.Residual in eval mode."""
        if self.norm_first:
            return y + sublayer(F.layer_norm(y, norm.normalized_shape, norm.weight, norm.bias, norm.eps))
        return F.layer_norm(y + sublayer(y), norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """Same contract as Transformer.decode: tgt [B, T] -> hidden [B, T, d]; fills `cache`."""
        offset = cache.length if cache is not None else 0
        length = tgt.shape[1]
        if offset + length > self.positions.shape[0]:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len={self.positions.shape[0]}")
        y = F.embedding(tgt, self.lookup) * self.scale + self.positions[offset:offset + length]  # [B, T, d]
        self_mask = causal_mask(length, offset, tgt.device)                    # [1, 1, T, offset+T] or None
        for i, layer in enumerate(self.layers):
            parts = cache.layers[i] if cache is not None else None

            def self_attention(h: torch.Tensor) -> torch.Tensor:
                q, k, v = (self._heads(x) for x in _linear(h, layer.self_qkv).chunk(3, dim=-1))  # 3 x [B, H, T, dh]
                if parts is not None:
                    kept = parts.setdefault("self", {})
                    if "k" in kept:
                        k = torch.cat([kept["k"], k], dim=2)                    # [B, H, offset+T, dh]
                        v = torch.cat([kept["v"], v], dim=2)
                    kept["k"], kept["v"] = k, v
                context = F.scaled_dot_product_attention(q, k, v, attn_mask=self_mask)  # [B, H, T, dh]
                return _linear(self._merge(context), layer.self_out)          # [B, T, d]

            def cross_attention(h: torch.Tensor) -> torch.Tensor:
                q = self._heads(_linear(h, layer.cross_q))                    # [B, H, T, dh]
                kept = parts.setdefault("cross", {}) if parts is not None else {}
                if "k" not in kept:
                    kept["k"], kept["v"] = (self._heads(x) for x in _linear(memory, layer.cross_kv).chunk(2, dim=-1))
                context = F.scaled_dot_product_attention(q, kept["k"], kept["v"], attn_mask=src_mask)  # [B, H, T, dh]
                return _linear(self._merge(context), layer.cross_out)         # [B, T, d]

            def feed_forward(h: torch.Tensor) -> torch.Tensor:
                return _linear(torch.relu(_linear(h, layer.ffn_in)), layer.ffn_out)  # [B, T, d]

            y = self._block(y, layer.norms[0], self_attention)                  # [B, T, d]
            y = self._block(y, layer.norms[1], cross_attention)                 # [B, T, d]
            y = self._block(y, layer.norms[2], feed_forward)                    # [B, T, d]
        if cache is not None:
            cache.length += length
        if self.final_norm is not None:
            n = self.final_norm
            y = F.layer_norm(y, n.normalized_shape, n.weight, n.bias, n.eps)   # [B, T, d]
        return y

    def generator(self, hidden: torch.Tensor) -> torch.Tensor:
        """Log-probs [B, T, V], as Generator.forward."""
        logits = (hidden.reshape(-1, hidden.shape[-1]) @ self.vocab).view(*hidden.shape[:-1], -1)  # [B, T, V]
        return torch.log_softmax(logits.float(), dim=-1)                        # [B, T, V]
