"""The bounds on what a configuration may say, and the checks that apply them.

explorer.config's dataclasses call these as they are made: a config.json read from disk, a form in the
app or a command line may say anything, and nothing sized by a field is allocated before the field is
checked here. Kept apart from the dataclasses so each reads in one screen; imports nothing of the
project's (reading a config needs no torch).
"""
from __future__ import annotations

import numbers
from dataclasses import fields
from typing import Any

# Upper bounds on what a config (a checkpoint's config.json included) may describe, checked before
# anything is allocated. Far above any translation model in use (the paper's big model: d_model
# 1024, d_ff 4096, 16 heads, 6+6 layers; NLLB's vocabulary: 256k). Each size alone is bounded here;
# what they add up to in memory is bounded by MAX_MODEL_BYTES.
MODEL_LIMITS = {"src_vocab_size": 1 << 20, "tgt_vocab_size": 1 << 20, "d_model": 16384, "n_heads": 256,
                "d_ff": 65536, "n_encoder_layers": 128, "n_decoder_layers": 128, "max_len": 65536}
# Lower bounds above 1, for what a model can translate with at all. max_len: a target the decoder is
# trained on or scored against is BOS + its pieces + EOS in at most max_len ids (explorer.text.encoding.
# target_ids), so below 3 no target holds a single piece; max_len 1 also leaves a source of EOS alone (a
# checkpoint saying so evaluated to BLEU 0.00 and explained an empty source). The trainer's models have
# at least 64 (and its --max-len at least 8); imported ones their max_position_embeddings (512, 1,024).
MODEL_MINIMUMS = {"max_len": 3}
MAX_POSITION_VALUES = 1 << 24     # max_len * d_model: the sinusoidal table (64 MiB in float32)
# The choices of ModelConfig.activation, .pe_layout and .pe_frequencies, named here so reading a config needs no torch;
# model/functional.py holds their formulas (ACTIVATIONS, sinusoidal_table) and checks it has them all.
ACTIVATION_NAMES = ("relu", "swish", "gelu")
PE_LAYOUTS = ("interleaved", "halves")
PE_FREQUENCIES = ("paper", "fairseq")

# The library's limits on a decode. A beam of k ranks 2k candidates per step, and a BeamTrace keeps
# them all: far beyond the sizes translation uses (4-12), k only buys time and memory. Interfaces may
# cap lower (the app's sliders do, see webapp/decode_form.py and the Beam page), never higher.
MAX_BEAM = 64                     # beam_size and n_best
MAX_DECODE_LEN = 4096             # max_len_b and min_len, in tokens


def is_int(value: Any) -> bool:
    """An integer and not a bool (JSON's true is no layer count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_model(cfg: Any) -> None:
    """A ModelConfig's fields, each in its range and of its type, and the ids and sizes that must agree
    with each other: ValueError naming the field."""
    for name, limit in MODEL_LIMITS.items():
        value, low = getattr(cfg, name), MODEL_MINIMUMS.get(name, 1)
        if not is_int(value) or not low <= value <= limit:
            raise ValueError(f"{name} must be an integer in [{low}, {limit:,}], not {value!r}")
    if cfg.max_len * cfg.d_model > MAX_POSITION_VALUES:
        raise ValueError(f"max_len x d_model = {cfg.max_len * cfg.d_model:,} exceeds {MAX_POSITION_VALUES:,} "
                         "(the positional table built when the model is made)")
    if not is_int(cfg.pe_offset) or not 0 <= cfg.pe_offset <= MODEL_LIMITS["max_len"]:
        raise ValueError(f"pe_offset must be an integer in [0, {MODEL_LIMITS['max_len']:,}], not {cfg.pe_offset!r}")
    if cfg.pe_frequencies not in PE_FREQUENCIES:
        raise ValueError(f"pe_frequencies must be one of {', '.join(PE_FREQUENCIES)}, not {cfg.pe_frequencies!r}")
    if cfg.pe_frequencies == "fairseq" and (cfg.d_model % 2 or cfg.d_model < 4):
        raise ValueError(f"fairseq's sinusoids need an even d_model of at least 4, not {cfg.d_model}")
    both = min(cfg.src_vocab_size, cfg.tgt_vocab_size)
    for name, size, which in (("pad_id", both, "both vocabularies"), ("eos_id", both, "both vocabularies"),
                              ("unk_id", both, "both vocabularies"),
                              ("decoder_start_id", cfg.tgt_vocab_size, "the target vocabulary")):
        value = getattr(cfg, name)
        if not is_int(value) or not 0 <= value < size:
            raise ValueError(f"{name} must be an integer id of {which} (0 to {size - 1}), not {value!r}")
    if cfg.eos_id in (cfg.pad_id, cfg.unk_id):       # the decoder may start with EOS (M2M100, NLLB)
        raise ValueError(f"eos_id ({cfg.eos_id}) must differ from pad_id and unk_id ({cfg.pad_id}, {cfg.unk_id})")
    if cfg.unk_id == cfg.pad_id:
        raise ValueError(f"unk_id and pad_id must differ, both are {cfg.pad_id}")
    if cfg.activation not in ACTIVATION_NAMES:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATION_NAMES)}, not {cfg.activation!r}")
    if cfg.pe_layout not in PE_LAYOUTS:
        raise ValueError(f"pe_layout must be one of {', '.join(PE_LAYOUTS)}, not {cfg.pe_layout!r}")
    for name in ("norm_first", "tie_embeddings", "scale_embeddings", "final_logits_bias"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"{name} must be true or false, not {getattr(cfg, name)!r}")
    if cfg.tie_output is not None and not isinstance(cfg.tie_output, bool):
        raise ValueError(f"tie_output must be true, false or null (as tie_embeddings), not {cfg.tie_output!r}")
    if not isinstance(cfg.pe_base, (int, float)) or not 1.0 < cfg.pe_base < 1e12:
        raise ValueError(f"pe_base must be a number in (1, 1e12), not {cfg.pe_base!r}")
    if cfg.d_model % cfg.n_heads != 0:
        raise ValueError(f"d_model ({cfg.d_model}) must be divisible by n_heads ({cfg.n_heads})")
    if cfg.positions not in ("sinusoidal", "learned"):
        raise ValueError(f"positions must be 'sinusoidal' or 'learned', not {cfg.positions!r}")
    if cfg.tie_embeddings and cfg.src_vocab_size != cfg.tgt_vocab_size:
        raise ValueError("tie_embeddings needs src_vocab_size == tgt_vocab_size (a joint vocabulary)")
    if not isinstance(cfg.dropout, (int, float)) or not 0.0 <= cfg.dropout < 1.0:
        raise ValueError("dropout must be in [0, 1)")


def check_decode(cfg: Any) -> None:
    """A DecodeConfig's ranges, the allowed range in the message (limits that depend on the model are
    checked when decoding)."""
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(what)

    need(cfg.strategy in ("greedy", "beam", "sample"), f"strategy must be one of greedy, beam, sample, not {cfg.strategy!r}")
    need(is_int(cfg.beam_size) and 1 <= cfg.beam_size <= MAX_BEAM,
         f"beam_size must be an integer in [1, {MAX_BEAM}], not {cfg.beam_size!r}")
    need(is_int(cfg.n_best) and 1 <= cfg.n_best <= MAX_BEAM,
         f"n_best must be an integer in [1, {MAX_BEAM}], not {cfg.n_best!r}")
    need(isinstance(cfg.max_len_a, (int, float)) and 0.0 <= cfg.max_len_a <= 10.0,
         f"max_len_a must be in [0, 10], not {cfg.max_len_a!r}")
    need(is_int(cfg.max_len_b) and 0 <= cfg.max_len_b <= MAX_DECODE_LEN,
         f"max_len_b must be an integer in [0, {MAX_DECODE_LEN}], not {cfg.max_len_b!r}")
    need(cfg.max_len_a > 0 or cfg.max_len_b >= 1,
         "max length a * src_len + b must allow at least 1 token (max_len_a > 0 or max_len_b >= 1)")
    need(is_int(cfg.min_len) and 0 <= cfg.min_len <= MAX_DECODE_LEN,
         f"min_len must be an integer in [0, {MAX_DECODE_LEN}], not {cfg.min_len!r}")
    need(cfg.length_penalty in ("none", "average", "gnmt"),
         f"length_penalty must be one of none, average, gnmt, not {cfg.length_penalty!r}")
    need(isinstance(cfg.alpha, (int, float)) and 0.0 <= cfg.alpha <= 5.0, f"alpha must be in [0, 5], not {cfg.alpha!r}")
    need(isinstance(cfg.temperature, (int, float)) and 0.0 < cfg.temperature <= 100.0,
         f"temperature must be in (0, 100], not {cfg.temperature!r}")
    need(is_int(cfg.top_k) and cfg.top_k >= 0, f"top_k must be an integer >= 0 (0 = off), not {cfg.top_k!r}")
    need(isinstance(cfg.top_p, (int, float)) and 0.0 < cfg.top_p <= 1.0, f"top_p must be in (0, 1], not {cfg.top_p!r}")
    need(is_int(cfg.seed), f"seed must be an integer, not {cfg.seed!r}")
    need(is_int(cfg.trace_top_k) and 0 <= cfg.trace_top_k <= 100,
         f"trace_top_k must be an integer in [0, 100], not {cfg.trace_top_k!r}")


# The numbers no run can use, whatever the trainer's limits (training.args.validate, which a run is
# checked against as well): (field, out of range, what it must be). Each test is False for NaN and passes
# infinity where no lower bound stops it: a non-finite number is the trainer's to name as such (it says
# "must be a finite number", also to the Train page's Start, as a JobError).
_TRAIN_RANGES = (
    ("max_steps", lambda v: v < 0, ">= 0 (0: epochs decide)"),
    ("epochs", lambda v: v is not None and v <= 0, "> 0 or null"),
    ("batch_tokens", lambda v: v < 1, ">= 1"),
    ("accum_steps", lambda v: v < 1, ">= 1"),
    ("warmup", lambda v: v < 1, ">= 1"),
    ("lr_factor", lambda v: v <= 0, "> 0"),
    ("label_smoothing", lambda v: v < 0 or v >= 1, "in [0, 1)"),
    ("clip_norm", lambda v: v < 0, ">= 0 (0 = no clipping)"),
    ("dropout", lambda v: v is not None and (v < 0 or v >= 1), "in [0, 1) or null"),
    ("vocab_size", lambda v: v < 1, ">= 1"),
    ("log_every", lambda v: v < 1, ">= 1"),
    ("eval_every", lambda v: v < 0, ">= 0 (0 = off)"),
    ("save_every", lambda v: v < 0, ">= 0 (0 = off)"),
    ("keep_last", lambda v: v < 1, ">= 1"),
    ("eval_sentences", lambda v: v < 0, ">= 0"),
    ("max_len", lambda v: v < 1, ">= 1"),
    ("threads", lambda v: v is not None and v < 1, ">= 1 or null"),
)


def _of_type(value: Any, annotation: str) -> bool:
    """Whether `value` is of a field's annotation ("int", "float | None", ...): a bool is no number, an
    int is a float, a float (400.0 too) is no int."""
    kinds = annotation.replace(" ", "").split("|")
    if value is None or isinstance(value, (bool, str)):
        return {type(None): "None", bool: "bool", str: "str"}[type(value)] in kinds
    if is_int(value):
        return "int" in kinds or "float" in kinds
    return isinstance(value, float) and "float" in kinds


def check_train_fields(cfg: Any) -> None:
    """A TrainConfig's fields each of its type, and no number any run can refuse to use (_TRAIN_RANGES):
    ValueError naming it."""
    for f in fields(cfg):
        if not _of_type(getattr(cfg, f.name), str(f.type)):
            raise ValueError(f"{f.name} must be {f.type}, not {getattr(cfg, f.name)!r}")
    for name, out_of_range, what in _TRAIN_RANGES:
        if out_of_range(getattr(cfg, name)):
            raise ValueError(f"{name} must be {what}, not {getattr(cfg, name)!r}")
