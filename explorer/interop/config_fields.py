"""The fields of a Hugging Face config.json that the import reads, each checked for its JSON type before
it is compared or used.

`"encoder_attention_heads": "4"` is text, `true` is not the number 1, and `"false"` is not false,
whatever Python's int() and bool() would make of them; a field of the wrong kind is named as such
(`encoder_attention_heads must be a whole number, not the text '4'`), never compared as it stands.
A size is held to ModelConfig's bound for it here too, so that the message names the field as
config.json does (encoder_attention_heads, not n_heads); ModelConfig checks the rest. A value is
shown cut short (`shown`, `brief`): config.json may hold a megabyte of text in any field, and a
message is one line.
"""
from __future__ import annotations

from typing import Any, Mapping

from explorer.config.checks import MODEL_LIMITS

# the sizes both families need, with no default taken
SIZES = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
         "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings")
IDS = ("pad_token_id", "eos_token_id")
OPTIONAL_WHOLE_NUMBERS = ("decoder_vocab_size", "decoder_start_token_id")      # null: the default
FLAGS = ("share_encoder_decoder_embeddings", "tie_word_embeddings", "scale_embedding", "static_position_embeddings")
NUMBERS = ("dropout",)
# each size's bound is ModelConfig's for the field it becomes, checked here to name the field as written
BOUNDED_AS = {"vocab_size": "src_vocab_size", "decoder_vocab_size": "tgt_vocab_size", "d_model": "d_model",
              "encoder_layers": "n_encoder_layers", "decoder_layers": "n_decoder_layers",
              "encoder_attention_heads": "n_heads", "decoder_attention_heads": "n_heads", "encoder_ffn_dim": "d_ff",
              "decoder_ffn_dim": "d_ff", "max_position_embeddings": "max_len"}
TEXTS = ("model_type", "activation_function")
SHOWN_CHARS = 40


class FieldError(ValueError):
    """A config.json field missing or of the wrong JSON type; the message names it."""


def shown(value: Any) -> str:
    """`value` in words, as JSON would name it, cut to one short line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the text {brief(value)}"
    if isinstance(value, (int, float)):
        return f"the number {brief(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return brief(value)


def brief(value: Any) -> str:
    """repr(value), cut to SHOWN_CHARS characters."""
    text = repr(value[:SHOWN_CHARS + 1] if isinstance(value, str) else value)
    return text if len(text) <= SHOWN_CHARS + 2 else text[:SHOWN_CHARS] + "..."


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_field_types(hf: Mapping[str, Any], required: tuple[str, ...], flags: tuple[str, ...] = ()) -> None:
    """Refuse (FieldError) a field of `required` that is missing, and any field the import reads that is
    of the wrong kind (sizes and ids whole numbers, FLAGS and `flags` true or false, dropout a number,
    names text), then a size outside ModelConfig's bounds."""
    for key in required:
        if key not in hf:
            raise FieldError(f"{key} is missing (the import takes no default for it)")
    kinds = ((SIZES + IDS, _is_whole, "a whole number"),
             (OPTIONAL_WHOLE_NUMBERS, lambda v: v is None or _is_whole(v), "a whole number or null"),
             (FLAGS + flags, lambda v: isinstance(v, bool), "true or false"),
             (NUMBERS, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
             (TEXTS, lambda v: isinstance(v, str), "text"))
    for keys, fits, kind in kinds:
        for key in keys:
            if key in hf and not fits(hf[key]):
                raise FieldError(f"{key} must be {kind}, not {shown(hf[key])}")
    for key, ours in BOUNDED_AS.items():
        value, limit = hf.get(key), MODEL_LIMITS[ours]
        if value is not None and not 1 <= value <= limit:
            raise FieldError(f"{key} must be an integer in [1, {limit:,}], not {brief(value)}")
