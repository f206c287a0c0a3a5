"""Hugging Face M2M100 (and NLLB-200, the same architecture) -> this project's Transformer: config and weights.

transformers' M2M100ForConditionalGeneration (fairseq's multilingual Transformer, Fan et al. 2020;
NLLB-200, NLLB Team 2022, is the same model with another vocabulary) is the paper's encoder-decoder
with ModelConfig options set otherwise:
  pre-LayerNorm, with one LayerNorm at the end of each stack    norm_first (the final norm comes with it)
  ReLU, scaled embeddings, one shared vocabulary, tied output  activation, scale_embeddings, tie_*
  fairseq's sinusoids: [sin | cos] halves, frequencies          pe_layout "halves", pe_frequencies "fairseq",
    1/10000^(i/(d/2-1)), positions numbered from pad + 1          pe_offset = pad + 1
  the decoder starting with </s> (decoder_start_token_id 2)    decoder_start_id = eos_id
The tensors are Marian's names (the same BART-family layers, marian.ENCODER_LAYER / DECODER_LAYER)
plus the two final norms. Positions: M2M100 gives a padding token the zero row and counts only real
tokens; here every token has a position, which differs only at padding, which attention masks out.
The positional table covers max_position_embeddings positions (1,024 in M2M100 and NLLB); transformers
grows its table past that, this model refuses a longer sequence.
"""
from __future__ import annotations

from typing import Any, Mapping

from explorer.config import ModelConfig
from explorer.interop.config_fields import SIZES, FieldError, brief, check_field_types
from explorer.interop.marian import ACTIVATION_FROM_HF, ConversionError, check_one_value_serves_both, name_map
from explorer.text.special import SpecialIds

MODEL_TYPE = "m2m_100"
HF_PE_BASE = 10000.0             # M2M100SinusoidalPositionalEmbedding's, fixed in transformers
FINAL_NORMS = {"encoder.norm": "model.encoder.layer_norm", "decoder.norm": "model.decoder.layer_norm"}
OTHER_TYPES = {"nllb-moe": "NLLB-MoE (mixture of experts)", "marian": "Marian (convert it as such: it is "
               "recognised by its model_type)", "mbart": "mBART", "bart": "BART", "t5": "T5", "mt5": "mT5"}


def is_m2m100(hf: Mapping[str, Any]) -> bool:
    return isinstance(hf, Mapping) and hf.get("model_type") == MODEL_TYPE


def named_type(kind: Any) -> str:
    """A config.json's model_type in words: a known family's name, else the value as written (cut short)."""
    return OTHER_TYPES.get(kind, brief(kind)) if isinstance(kind, str) else brief(kind)


def model_config_from_hf(hf: Mapping[str, Any], special: SpecialIds) -> ModelConfig:
    """The ModelConfig of an M2M100 / NLLB config.json (`special`: the tokenizer's ids). Refuses what it
    cannot represent, in one line naming it; ModelConfig then checks every size against its limits."""
    if not isinstance(hf, Mapping):
        raise ConversionError("not a JSON object")
    kind = hf.get("model_type")
    if kind != MODEL_TYPE:
        raise ConversionError(f"model_type is {named_type(kind)}, not 'm2m_100' (M2M100 and NLLB-200 import this way)")
    try:
        check_field_types(hf, SIZES)
    except FieldError as exc:
        raise ConversionError(str(exc)) from None
    check_one_value_serves_both(hf)
    activation = ACTIVATION_FROM_HF.get(hf.get("activation_function", "relu"))
    if activation is None:
        raise ConversionError(f"activation_function {brief(hf.get('activation_function'))} is not one of "
                              f"{', '.join(ACTIVATION_FROM_HF)}")
    pad, eos = hf.get("pad_token_id", 1), hf.get("eos_token_id", 2)
    start = hf.get("decoder_start_token_id")
    start = eos if start is None else start                      # null: the default, as a missing key
    if (pad, eos) != (special.pad, special.eos):
        raise ConversionError(f"pad/eos ids ({pad}/{eos}) differ from the tokenizer's "
                              f"<pad>/</s> ({special.pad}/{special.eos})")
    d_model = hf.get("d_model")
    if d_model % 2 or d_model < 4:
        raise ConversionError(f"d_model {d_model}: fairseq's sinusoids need an even d_model of at least 4")
    vocab = hf.get("vocab_size")
    # tie_word_embeddings false: the encoder's and the decoder's embeddings and lm_head are three matrices
    # (transformers keeps model.shared apart too, unused)
    tied = hf.get("tie_word_embeddings", True)
    try:
        return ModelConfig(
            src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=hf.get("encoder_attention_heads"),
            d_ff=hf.get("encoder_ffn_dim"), n_encoder_layers=hf.get("encoder_layers"),
            n_decoder_layers=hf.get("decoder_layers"), dropout=hf.get("dropout", 0.1),
            max_len=hf.get("max_position_embeddings"), pe_base=HF_PE_BASE, positions="sinusoidal", norm_first=True,
            tie_embeddings=tied, tie_output=tied, activation=activation,
            pe_layout="halves", pe_frequencies="fairseq", pe_offset=pad + 1,
            scale_embeddings=hf.get("scale_embedding", True), final_logits_bias=False,
            pad_id=special.pad, eos_id=special.eos, unk_id=special.unk, decoder_start_id=start)
    except (TypeError, ValueError) as exc:
        raise ConversionError(str(exc)) from None


def m2m100_name_map(cfg: ModelConfig) -> dict[str, str]:
    """Our parameter name -> its Hugging Face name: Marian's layers and embeddings, and the final norms."""
    out = name_map(cfg)
    for ours, theirs in FINAL_NORMS.items():
        for kind in ("weight", "bias"):
            out[f"{ours}.{kind}"] = f"{theirs}.{kind}"
    return out
