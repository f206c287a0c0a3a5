"""An int8 copy of a model for decoding: every linear layer's product in int8, the float model untouched.

Why: at OPUS-MT size a beam step reads ~207 MB of float32 weights (the 512 x 58,101 output projection
above all), about what one core's memory bandwidth carries; int8 weights are a quarter of that and the
products run on the CPU's int8 dot-product instructions. The kernel is torch's dynamically quantized
linear (`torch.ops.quantized.linear_dynamic` on weights prepacked by `linear_prepack`, fbgemm's kernels
where torch has them, else oneDNN's or QNNPACK's): weights int8 per output row (symmetric, scale =
max |row| / 127, as CTranslate2's int8), the input quantized on the fly per call (uint8, one scale and
zero point for the whole [N, in] input, from its min and max), int32 sums, float32 out with the bias.
Measured on this project's machine (`python -m benchmarks int8-kernels`: 1 thread, 5 rows;
docs/PERFORMANCE.md): 3-5x the float32 oneDNN product the plain decoder uses on every product of a step,
the output projection included; oneDNN's int8 `qlinear_pointwise` was level on the output projection but
2-3x slower on the small products (its input is quantized by separate torch calls), `torch._int_mm` (no
fused scaling) and weight-only `_weight_int8pack_mm` no faster than float32.

`Int8Model` is a separate object: it copies the weights it quantizes and only reads the float model's
embeddings, positions and LayerNorm parameters (never written), so every analysis that hooks the float
modules sees them as they were. It has no modules to hook: decoding runs it like the plain decoder
(explorer/model/plain_decoder.py, whose arithmetic and DecoderCache it shares), encoder included.
Its results differ from the float model's by int8 rounding (explorer/model/rounding.py's int8_atol bounds
each product; tests/unit/test_int8_model.py), so everything computed on it says `int8`.
The input's one scale per call means a row's result depends on the other rows of its batch (the beam's
hypotheses, a batch's sentences), unlike the float path.
"""
from __future__ import annotations

import warnings
from functools import cache, partial

import torch
import torch.nn.functional as F
from torch import nn

from explorer.model import functional as fn
from explorer.model.plain_decoder import PlainDecoder, Product
from explorer.model.transformer import DecoderCache, Transformer

ENGINES = ("fbgemm", "onednn", "qnnpack")     # tried in this order; the first whose products check out
INT8_KERNEL = "torch.ops.quantized.linear_dynamic"


class Int8Unavailable(ValueError):
    """This torch or this model cannot decode in int8; the message is one line for the user."""


def weight_scales(weight: torch.Tensor) -> torch.Tensor:
    """Per output row: max |w| / 127 (symmetric int8), a zero row given a tiny positive scale. [out]"""
    return (weight.detach().abs().amax(dim=1) / 127.0).clamp_min(1e-12)            # [out]


def reduce_range() -> bool:
    """fbgemm's u8 x s8 products saturate 16-bit pair sums on CPUs without VNNI; torch's own default there
    is 7-bit inputs (reduce_range), which this follows. oneDNN and QNNPACK need none."""
    return engine() == "fbgemm" and not torch.cpu._is_vnni_supported()


def _pack(weight: torch.Tensor, bias: torch.Tensor | None, name: str):
    """The weight [out, in] quantized per row and prepacked for engine `name`, with its float32 bias."""
    scales = weight_scales(weight)                                                   # [out]
    previous = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = name
        with warnings.catch_warnings():          # quantized tensors are deprecated in favour of torchao
            warnings.simplefilter("ignore")
            quantized = torch.quantize_per_channel(weight.detach().float().contiguous(), scales.double(),
                                                   torch.zeros_like(scales, dtype=torch.long), 0, torch.qint8)
            return torch.ops.quantized.linear_prepack(quantized, None if bias is None else bias.detach().float())
    finally:
        torch.backends.quantized.engine = previous


@cache
def engine() -> str | None:
    """The first engine of ENGINES that this torch has and whose int8 product of a small example lands
    within int8 rounding of the float product; None when none does (int8 is then refused)."""
    from explorer.model.rounding import int8_atol

    weight = torch.linspace(-1.0, 1.0, 24 * 16).view(24, 16)                        # [out, in]
    x = torch.linspace(-2.0, 2.0, 3 * 16).view(3, 16).flip(1)                       # [N, in]
    for name in ENGINES:
        if name not in torch.backends.quantized.supported_engines:
            continue
        try:
            got = torch.ops.quantized.linear_dynamic(x, _pack(weight, None, name), name == "fbgemm")
        except (AttributeError, RuntimeError, NotImplementedError):
            continue
        if float((got - x @ weight.t()).abs().max()) <= int8_atol(x, weight, reduced=True):
            return name
    return None


def int8_product(*linears: nn.Linear) -> Product:
    """The product x W^T + b of one or more projections side by side (fused), in int8: a closure, as
    plain_decoder._product is (a decoding step makes ~40 of these calls)."""
    weight = torch.cat([m.weight.detach() for m in linears])                        # [n*out, in]
    bias = None if linears[0].bias is None else torch.cat([m.bias.detach() for m in linears])  # [n*out] or None
    packed, reduced = _pack(weight, bias, engine()), reduce_range()
    linear = torch.ops.quantized.linear_dynamic

    def product(x: torch.Tensor) -> torch.Tensor:
        return linear(x.contiguous(), packed, reduced)                               # [..., n*out]
    return product


def check_quantizable(model: nn.Module) -> None:
    """Raise Int8Unavailable (one line) unless `model` is a float32 Transformer on the CPU and this torch
    has an int8 engine."""
    if not isinstance(model, Transformer):
        raise Int8Unavailable("int8 decoding needs one of this project's models")
    weight = model.generator.proj.weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        raise Int8Unavailable(f"int8 decoding runs on the CPU in float32 only, not on {weight.device.type} "
                              f"in {str(weight.dtype).replace('torch.', '')}")
    if engine() is None:
        raise Int8Unavailable(f"this torch ({torch.__version__}) has no working int8 engine "
                              f"({', '.join(ENGINES)}); decode in float32")


class Int8Model:
    """A Transformer's encoder, decoder and generator with every linear layer's product in int8.

    What decoding asks of a model (encode, a PlainDecoder, new_cache, decoding_watched, cfg, parameters
    for the device) and the teacher-forced call the evaluate command scores with; nothing to hook.
    Build it with `quantize(model)`; `int8` is True so results can say what computed them.
    """

    int8 = True
    training = False

    def __init__(self, model: Transformer):
        check_quantizable(model)
        self.cfg, self.kernel = model.cfg, f"{INT8_KERNEL} ({engine()})"
        self._float_model_parameters = model.parameters            # the device, read by decoding
        with torch.no_grad():
            enc = model.encoder
            self.encoder_embed = partial(fn.embed, lookup=partial(F.embedding, weight=enc.embed.lookup.weight),
                                         table=enc.embed.table, offset=0, scale=enc.embed.scale)
            self.encoder_layers = [self._encoder_layer(layer) for layer in enc.layers]
            self.encoder_norm = fn.layer_norm(enc.norm) if isinstance(enc.norm, nn.LayerNorm) else fn.identity
            self.plain_decoder = PlainDecoder(model, product=int8_product)

    def _encoder_layer(self, layer) -> fn.Map:
        """One encoder layer as EncoderLayer.forward without its capture points: x, mask -> x."""
        attn, ffn, heads = layer.self_attn, layer.ffn, layer.self_attn.n_heads
        qkv, out = int8_product(attn.w_q, attn.w_k, attn.w_v), int8_product(attn.w_o)
        feed = partial(fn.feed_forward, w_1=int8_product(ffn.w_1), w_2=int8_product(ffn.w_2),
                       activation=ffn.activation)
        blocks = tuple(partial(fn.residual, norm=fn.layer_norm(b.norm), norm_first=b.norm_first)
                       for b in (layer.attn_block, layer.ffn_block))

        def run(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
            return fn.encoder_layer(x, lambda h: fn.self_attention(h, qkv, out, heads, mask), feed, blocks)  # [B, S, d]
        return run

    # ------------------------------------------------------------------ what decoding calls
    def parameters(self):
        return self._float_model_parameters()

    def eval(self) -> "Int8Model":
        return self

    def decoding_watched(self) -> bool:
        return False

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(self.cfg.n_decoder_layers)

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return (src != self.cfg.pad_id).view(src.shape[0], 1, 1, src.shape[1])     # [B, 1, 1, S]

    @torch.no_grad()
    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src [B, S] -> (memory [B, S, d], src_mask [B, 1, 1, S]), as Transformer.encode."""
        mask = self.src_mask(src)
        x = self.encoder_embed(src)                                                  # [B, S, d]
        for layer in self.encoder_layers:
            x = layer(x, mask)                                                       # [B, S, d]
        return self.encoder_norm(x), mask

    @torch.no_grad()
    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               cache: DecoderCache | None = None) -> torch.Tensor:
        return self.plain_decoder.decode(tgt, memory, src_mask, cache)               # [B, T, d]

    @torch.no_grad()
    def generator(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.plain_decoder.generator(hidden)                                  # [B, T, V]

    @torch.no_grad()
    def logits(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits [B, T, V] for target inputs (start id + target[:-1])."""
        memory, src_mask = self.encode(src)
        return self.plain_decoder.vocab(self.decode(tgt_in, memory, src_mask))      # [B, T, V]

    def __call__(self, src: torch.Tensor, tgt_in: torch.Tensor, return_logits: bool = False) -> torch.Tensor:
        """Teacher-forced log-probs [B, T, V] (raw logits if `return_logits`), as Transformer.forward."""
        logits = self.logits(src, tgt_in)                                            # [B, T, V]
        return logits if return_logits else fn.log_probs(logits)


def quantize(model: Transformer) -> Int8Model:
    """A new Int8Model of `model` (which is left as it was); Int8Unavailable says why not, in one line."""
    return Int8Model(model)


def is_int8(model) -> bool:
    """Whether `model` decodes in int8 (results computed on it must say so)."""
    return bool(getattr(model, "int8", False))
