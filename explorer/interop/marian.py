"""Hugging Face Marian (OPUS-MT) <-> this project's Transformer: the config and the weights, both ways.

transformers' MarianMTModel (a port of Marian NMT, Junczys-Dowmunt et al. 2018) is the paper's
post-LayerNorm encoder-decoder with sinusoidal positions; what differs is what ModelConfig's options
say: the FFN activation (swish in OPUS-MT), the sinusoid layout ([sin of every frequency | cos of
every frequency], "halves"), the embedding scale, a final logits bias, which embeddings are tied,
and the special ids (eos 0, unk 1, pad the last id, the decoder starting with pad). So a Marian
model imports by renaming its tensors (NAMES below, written once and read both ways), and a model
of ours exports the same way. One thing needs arithmetic: a model of ours with the paper's
interleaved sinusoids exports to the halves layout by permuting the model dimension consistently
in every weight that reads or writes the residual stream (`residual_axis`). The positional
encoding is added to the embeddings, every sublayer reads the residual through a linear map or a
LayerNorm and writes it back through one, and LayerNorm's mean and variance do not depend on the
order of the dimensions, so the permuted model computes the same function.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import torch

from explorer.config import ModelConfig
from explorer.interop.config_fields import IDS, SIZES, FieldError, brief, check_field_types
from explorer.text.special import SpecialIds

# HF's activation_function names -> ModelConfig.activation ("swish" and "silu" are one function).
ACTIVATION_FROM_HF = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
# Marian options this model does not have: the import refuses a config that turns one on.
UNSUPPORTED_FLAGS = ("normalize_before", "normalize_embedding", "add_final_layer_norm", "add_bias_logits",
                     "scale_attn_weights_by_layer")
HF_PE_BASE = 10000.0            # MarianSinusoidalPositionalEmbedding's base, fixed in transformers

# Our tensor name (per layer, after "encoder.layers.{i}." / "decoder.layers.{i}.") -> Hugging Face's.
_ATTN = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "out_proj"}
ENCODER_LAYER = {**{f"self_attn.{o}": f"self_attn.{h}" for o, h in _ATTN.items()},
                 "ffn.w_1": "fc1", "ffn.w_2": "fc2",
                 "attn_block.norm": "self_attn_layer_norm", "ffn_block.norm": "final_layer_norm"}
DECODER_LAYER = {**{f"self_attn.{o}": f"self_attn.{h}" for o, h in _ATTN.items()},
                 **{f"cross_attn.{o}": f"encoder_attn.{h}" for o, h in _ATTN.items()},
                 "ffn.w_1": "fc1", "ffn.w_2": "fc2", "self_block.norm": "self_attn_layer_norm",
                 "cross_block.norm": "encoder_attn_layer_norm", "ffn_block.norm": "final_layer_norm"}
SHARED, SRC_EMBED, TGT_EMBED = "model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
LM_HEAD, LOGITS_BIAS = "lm_head.weight", "final_logits_bias"


class ConversionError(ValueError):
    """A model that cannot be converted, with the reason (an option one side lacks, a missing tensor)."""


# ---- configs --------------------------------------------------------------------------------------

def model_config_from_hf(hf: Mapping[str, Any], special: SpecialIds, *, logits_bias: bool) -> ModelConfig:
    """The ModelConfig of a Marian config.json (`special`: the ids the tokenizer's vocabulary names;
    `logits_bias`: whether the weights hold a non-zero final_logits_bias). Refuses what it cannot
    represent, naming the option; ModelConfig then checks every size against its limits."""
    if not isinstance(hf, Mapping):
        raise ConversionError("not a JSON object")
    if hf.get("model_type") != "marian":
        raise ConversionError(f"model_type is {brief(hf.get('model_type'))}, not 'marian' (only Marian models import)")
    try:
        check_field_types(hf, SIZES + IDS, flags=UNSUPPORTED_FLAGS)
    except FieldError as exc:
        raise ConversionError(str(exc)) from None
    for flag in UNSUPPORTED_FLAGS:
        if hf.get(flag):
            raise ConversionError(f"{flag} is set: this model has no such option")
    if hf.get("static_position_embeddings") is False:
        raise ConversionError("static_position_embeddings is false: learned positions of Marian's kind are not "
                              "supported")
    check_one_value_serves_both(hf)
    activation = ACTIVATION_FROM_HF.get(hf.get("activation_function", "gelu"))
    if activation is None:
        raise ConversionError(f"activation_function {brief(hf.get('activation_function'))} is not one of "
                              f"{', '.join(ACTIVATION_FROM_HF)}")
    vocab = hf.get("vocab_size")
    shared = hf.get("share_encoder_decoder_embeddings", True)
    hf_pad, hf_eos, hf_start = hf.get("pad_token_id"), hf.get("eos_token_id"), hf.get("decoder_start_token_id")
    if (hf_pad, hf_eos) != (special.pad, special.eos):
        raise ConversionError(f"pad/eos ids ({hf_pad}/{hf_eos}) differ from the vocabulary's "
                              f"<pad>/</s> ({special.pad}/{special.eos})")
    try:
        return ModelConfig(
            src_vocab_size=vocab, tgt_vocab_size=vocab if shared else (hf.get("decoder_vocab_size") or vocab),
            d_model=hf.get("d_model"), n_heads=hf.get("encoder_attention_heads"), d_ff=hf.get("encoder_ffn_dim"),
            n_encoder_layers=hf.get("encoder_layers"), n_decoder_layers=hf.get("decoder_layers"),
            dropout=hf.get("dropout", 0.1), max_len=hf.get("max_position_embeddings"), pe_base=HF_PE_BASE,
            positions="sinusoidal", norm_first=False, tie_embeddings=shared,
            tie_output=hf.get("tie_word_embeddings", True), activation=activation, pe_layout="halves",
            scale_embeddings=hf.get("scale_embedding", False), final_logits_bias=logits_bias,
            pad_id=special.pad, eos_id=special.eos, unk_id=special.unk,
            decoder_start_id=special.pad if hf_start is None else hf_start)
    except (TypeError, ValueError) as exc:
        raise ConversionError(str(exc)) from None


def check_one_value_serves_both(hf: Mapping[str, Any]) -> None:
    """Refuse different encoder and decoder head counts or FFN sizes (after check_field_types: both numbers)."""
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf.get(enc) != hf.get(dec):
            raise ConversionError(f"{enc} ({hf.get(enc)}) differs from {dec} ({hf.get(dec)}): one value serves both "
                                  "here")


def hf_config(cfg: ModelConfig) -> dict[str, Any]:
    """The config.json of MarianMTModel for a model of ours (after checking it can be one)."""
    check_exportable(cfg)
    eos = cfg.eos_id
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "vocab_size": cfg.src_vocab_size, "decoder_vocab_size": cfg.tgt_vocab_size,
        "d_model": cfg.d_model, "encoder_layers": cfg.n_encoder_layers, "decoder_layers": cfg.n_decoder_layers,
        "encoder_attention_heads": cfg.n_heads, "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff, "decoder_ffn_dim": cfg.d_ff, "activation_function": cfg.activation,
        "max_position_embeddings": cfg.max_len, "scale_embedding": cfg.scale_embeddings,
        "share_encoder_decoder_embeddings": cfg.tie_embeddings, "tie_word_embeddings": cfg.output_tied,
        "pad_token_id": cfg.pad_id, "eos_token_id": eos, "forced_eos_token_id": eos, "bos_token_id": None,
        "decoder_start_token_id": cfg.decoder_start_id, "dropout": cfg.dropout, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "is_encoder_decoder": True, "static_position_embeddings": True,
    }


def hf_generation_config(cfg: ModelConfig) -> dict[str, Any]:
    """generation_config.json: the ids, and the tokens our decoders never write banned there too."""
    return {"decoder_start_token_id": cfg.decoder_start_id, "eos_token_id": cfg.eos_id,
            "forced_eos_token_id": cfg.eos_id, "pad_token_id": cfg.pad_id,
            "bad_words_ids": [[i] for i in cfg.special.never_output], "max_length": cfg.max_len,
            "num_beams": 5}


def check_exportable(cfg: ModelConfig) -> None:
    """Refuse a model MarianMTModel cannot express, naming the option."""
    problems = []
    if cfg.norm_first:
        problems.append("pre-LayerNorm (norm_first): Marian is post-LayerNorm")
    if cfg.positions != "sinusoidal":
        problems.append("learned positions: Marian's are sinusoidal")
    if cfg.pe_frequencies != "paper" or cfg.pe_offset:
        problems.append("fairseq's sinusoids (pe_frequencies, pe_offset): Marian's are the paper's from position 0")
    if cfg.pe_base != HF_PE_BASE:
        problems.append(f"pe_base {cfg.pe_base}: Marian's sinusoids use {HF_PE_BASE:g}")
    if cfg.pe_layout == "interleaved" and cfg.d_model % 2:
        problems.append("an odd d_model with interleaved sinusoids (no exact halves layout)")
    if cfg.tie_embeddings and not cfg.output_tied:
        problems.append("shared source/target embeddings with a separate output projection")
    if problems:
        raise ConversionError("cannot export to Marian: " + "; ".join(problems))


# ---- weights --------------------------------------------------------------------------------------

def name_map(cfg: ModelConfig) -> dict[str, str]:
    """Our parameter name -> the Hugging Face name it is stored under (tied ones to one HF name)."""
    out: dict[str, str] = {}
    for stack, table, n in (("encoder", ENCODER_LAYER, cfg.n_encoder_layers),
                            ("decoder", DECODER_LAYER, cfg.n_decoder_layers)):
        for i in range(n):
            for ours, theirs in table.items():
                for kind in ("weight", "bias"):
                    out[f"{stack}.layers.{i}.{ours}.{kind}"] = f"model.{stack}.layers.{i}.{theirs}.{kind}"
    out["encoder.embed.lookup.weight"] = SHARED if cfg.tie_embeddings else SRC_EMBED
    out["decoder.embed.lookup.weight"] = SHARED if cfg.tie_embeddings else TGT_EMBED
    out["generator.proj.weight"] = out["decoder.embed.lookup.weight"] if cfg.output_tied else LM_HEAD
    if cfg.final_logits_bias:
        out["generator.proj.bias"] = LOGITS_BIAS
    return out


def hf_aliases(hf_name: str) -> tuple[str, ...]:
    """The names a Marian file may hold one tensor under: save_pretrained writes a tied matrix once,
    older files write every alias."""
    if hf_name == SHARED:
        return (SHARED, SRC_EMBED, TGT_EMBED)
    return (hf_name,)


def residual_axis(name: str) -> int | None:
    """The axis of our tensor `name` that runs over the residual stream's d_model, or None."""
    if re.search(r"\.(w_q|w_k|w_v|w_1)\.weight$", name) or name.endswith(("lookup.weight", "proj.weight")):
        return 1                                         # reads the residual: [out, d] / [V, d]
    if re.search(r"\.(w_o|w_2)\.(weight|bias)$", name) or re.search(r"\.norm\.(weight|bias)$", name):
        return 0                                         # writes it (or normalises it): [d, in] / [d]
    return None


def halves_permutation(d_model: int) -> torch.Tensor:
    """p with halves[j] = interleaved[p[j]]: [sin_0, sin_1, ... | cos_0, cos_1, ...] from
    [sin_0, cos_0, sin_1, cos_1, ...]."""
    half = d_model // 2
    return torch.cat([torch.arange(half) * 2, torch.arange(half) * 2 + 1])          # [d]


def state_from_hf(get: Callable[[str], torch.Tensor | None], cfg: ModelConfig,
                  shapes: Mapping[str, tuple[int, ...]], names: Mapping[str, str] | None = None) -> dict[str, torch.Tensor]:
    """Our state dict (float32) from a Marian file's tensors: `get(hf_name)` returns one or None;
    `shapes` are our parameters' shapes, checked before a tensor is used.

    A tensor several of our names share (the tied embeddings and output projection: Marian's
    `model.shared.weight`) is read and converted once and the names hold that one tensor: three
    float32 copies of a 58k-piece embedding would be ~360 MB for nothing. NaN or infinite values are
    refused: the import must compute what its source computes, or say why it cannot. `names`: our
    name -> theirs (default: Marian's, name_map; M2M100's adds its final norms)."""
    out: dict[str, torch.Tensor] = {}
    converted: dict[str, torch.Tensor] = {}
    for ours, theirs in (name_map(cfg) if names is None else names).items():
        if theirs not in converted:
            found = {alias: t for alias in hf_aliases(theirs) if (t := get(alias)) is not None}
            if not found:
                raise ConversionError(f"the weights have no {theirs} (needed for {ours})")
            for alias, t in found.items():                 # torch.load gives whatever a .bin holds
                if t.layout != torch.strided or t.is_complex():
                    raise ConversionError(f"{alias} is a {'complex' if t.is_complex() else 'sparse'} tensor; a "
                                          "model's weights are dense real numbers")
                if not t.is_floating_point():        # was converted in silence: a model of whole-number weights
                    raise ConversionError(f"{alias} is stored as {str(t.dtype).removeprefix('torch.')}; a model's "
                                          "weights are floating-point")
            (first, tensor), *others = found.items()
            for alias, other in others:             # a tied matrix stored under each name must be one matrix
                if other.shape != tensor.shape or not torch.equal(other, tensor):
                    raise ConversionError(f"the weights hold {first} and {alias} with different values, where the "
                                          "config ties them (tie_word_embeddings / share_encoder_decoder_embeddings)")
            if theirs == LOGITS_BIAS:
                tensor = tensor.reshape(-1)                                      # [1, V] -> [V]
            if tuple(tensor.shape) != tuple(shapes[ours]):
                raise ConversionError(f"{theirs} has shape {tuple(tensor.shape)}, the config needs "
                                      f"{tuple(shapes[ours])}")
            tensor = tensor.to(torch.float32)
            if not bool(torch.isfinite(tensor).all()):
                raise ConversionError(f"{theirs} holds NaN or infinite values (a diverged or damaged model)")
            converted[theirs] = tensor
        out[ours] = converted[theirs]
    return out


def state_to_hf(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Marian's tensors for a model of ours, each stored once, permuted to the halves layout if needed."""
    cfg: ModelConfig = model.cfg
    check_exportable(cfg)
    perm = halves_permutation(cfg.d_model) if cfg.pe_layout == "interleaved" else None
    state = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for ours, theirs in name_map(cfg).items():
        if theirs in out:
            continue                                     # a tied matrix: stored once
        tensor = state[ours].detach().to("cpu", torch.float32)
        axis = residual_axis(ours)
        if perm is not None and axis is not None:
            tensor = tensor.index_select(axis, perm)
        out[theirs] = tensor.reshape(1, -1) if theirs == LOGITS_BIAS else tensor
    if LOGITS_BIAS not in out:
        out[LOGITS_BIAS] = torch.zeros(1, cfg.tgt_vocab_size)                  # [1, V] MarianMTModel's buffer
    return {name: t.contiguous() for name, t in out.items()}
