"""Export a checkpoint to CTranslate2 through its model-specification API (ctranslate2.specs).

Why not CTranslate2's Transformers converter on our Hugging Face export: its Marian loader assumes
Marian's vocabulary layout (it drops the last id as <pad>) and starts the decoder from a zero
vector, while a model trained here has <pad> at id 0 and starts from a learned <s> embedding. The
specification takes the tensors as they are: the positional table itself (so either sinusoid
layout, or learned positions, with no permutation), the embedding scale, the start token, the
final logits bias. The same path serves imported Marian models. Post-LayerNorm models only, as
Marian; CTranslate2 reads whole pieces (strings), so the vocabulary is the tokenizer's pieces by id.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

ACTIVATION_NAMES = {"relu": "RELU", "swish": "SWISH", "gelu": "GELU"}


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).contiguous().numpy()


def _linear(spec, *layers: torch.nn.Linear) -> None:
    """Fill a LinearSpec with one layer, or several fused along the output axis (q, k, v)."""
    spec.weight = _array(torch.cat([layer.weight for layer in layers], dim=0))        # [sum out, in]
    if layers[0].bias is not None:
        spec.bias = _array(torch.cat([layer.bias for layer in layers], dim=0))          # [sum out]


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _embeddings(stack_spec, embed) -> None:
    stack_spec.scale_embeddings = float(embed.scale)
    stack_spec.position_encodings.encodings = _array(embed.table)                         # [max_len, d]


def model_spec(model, tokenizer):
    """A ctranslate2 TransformerSpec holding `model`'s weights and `tokenizer`'s pieces."""
    from ctranslate2.specs import common_spec, transformer_spec   # here: ctranslate2 is an optional extra

    cfg = model.cfg
    if cfg.norm_first:
        raise ValueError("cannot export a pre-LayerNorm (norm_first) model to CTranslate2 here: post-norm only")
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers), cfg.n_heads, pre_norm=False,
        activation=getattr(common_spec.Activation, ACTIVATION_NAMES[cfg.activation]))
    enc, dec = model.encoder, model.decoder
    spec.encoder.embeddings[0].weight = _array(enc.embed.lookup.weight)                  # [V_src, d]
    _embeddings(spec.encoder, enc.embed)
    for layer_spec, layer in zip(spec.encoder.layer, enc.layers):
        attn = layer.self_attn
        _linear(layer_spec.self_attention.linear[0], attn.w_q, attn.w_k, attn.w_v)
        _linear(layer_spec.self_attention.linear[1], attn.w_o)
        _norm(layer_spec.self_attention.layer_norm, layer.attn_block.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.w_1)
        _linear(layer_spec.ffn.linear_1, layer.ffn.w_2)
        _norm(layer_spec.ffn.layer_norm, layer.ffn_block.norm)
    spec.decoder.embeddings.weight = _array(dec.embed.lookup.weight)                      # [V_tgt, d]
    _embeddings(spec.decoder, dec.embed)
    for layer_spec, layer in zip(spec.decoder.layer, dec.layers):
        own, cross = layer.self_attn, layer.cross_attn
        _linear(layer_spec.self_attention.linear[0], own.w_q, own.w_k, own.w_v)
        _linear(layer_spec.self_attention.linear[1], own.w_o)
        _norm(layer_spec.self_attention.layer_norm, layer.self_block.norm)
        _linear(layer_spec.attention.linear[0], cross.w_q)
        _linear(layer_spec.attention.linear[1], cross.w_k, cross.w_v)
        _linear(layer_spec.attention.linear[2], cross.w_o)
        _norm(layer_spec.attention.layer_norm, layer.cross_block.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.w_1)
        _linear(layer_spec.ffn.linear_1, layer.ffn.w_2)
        _norm(layer_spec.ffn.layer_norm, layer.ffn_block.norm)
    _linear(spec.decoder.projection, model.generator.proj)

    src = [tokenizer.id_to_piece(i, "src") for i in range(cfg.src_vocab_size)]
    tgt = [tokenizer.id_to_piece(i, "tgt") for i in range(cfg.tgt_vocab_size)]
    spec.register_source_vocabulary(src)
    spec.register_target_vocabulary(tgt)
    spec.config.unk_token, spec.config.eos_token = tgt[cfg.unk_id], tgt[cfg.eos_id]
    spec.config.bos_token = spec.config.decoder_start_token = tgt[cfg.decoder_start_id]
    spec.config.layer_norm_epsilon = float(enc.layers[0].attn_block.norm.eps)
    return spec


def convert(model, tokenizer, out: str | Path, quantization: str | None = None) -> None:
    """Write the CTranslate2 model of `model` into `out` (a fresh directory)."""
    from ctranslate2.converters.converter import Converter   # here: ctranslate2 is an optional extra

    class _Given(Converter):
        def _load(self):
            return model_spec(model, tokenizer)

    _Given().convert(str(out), quantization=quantization, force=True)
