"""Configuration dataclasses and named presets.

Every size lives in ModelConfig, which is stored verbatim in each checkpoint's config.json, so a
checkpoint always says exactly which model it holds (nanoGPT style). Presets are plain
ModelConfig values; `preset(name, **overrides)` is how code and the CLI get one.

What a setting from outside may name (the memory one model may take, a folder setting) is in
explorer/files/settings.py.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, fields
from typing import Any

from explorer.text.special import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SpecialIds


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the encoder-decoder Transformer (paper defaults where the paper has one)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    dropout: float = 0.1
    max_len: int = 512            # longest sequence the positional table covers
    pe_base: float = 10000.0      # 10000 in the paper; some course notes use 1000
    positions: str = "sinusoidal"  # "sinusoidal" | "learned"
    norm_first: bool = False      # False = post-norm as in the paper; True = pre-norm
    tie_embeddings: bool = True   # source and target embeddings are one matrix (needs one vocabulary)
    tie_output: bool | None = None  # the output projection is the target embedding matrix; None: as
                                    # tie_embeddings (so configs written before this field keep their meaning)
    activation: str = "relu"      # the FFN's non-linearity: "relu" (paper) | "swish" (= SiLU) | "gelu"
    pe_layout: str = "interleaved"  # sinusoids: "interleaved" (paper: sin even dims, cos odd) | "halves"
                                    # (Marian: [sin of every frequency | cos of every frequency])
    pe_frequencies: str = "paper"  # sinusoid i's frequency: "paper" 1 / base^(2i/d) | "fairseq" (M2M100, NLLB)
                                   # 1 / base^(i/(d/2 - 1)), tensor2tensor's, which reaches 1/base at the last pair
    pe_offset: int = 0            # the sinusoid index of the first position (M2M100 / NLLB: padding_idx + 1 = 2)
    scale_embeddings: bool = True  # token embeddings times sqrt(d_model) (paper); False: unscaled
    final_logits_bias: bool = False  # a learned [tgt_vocab] bias added to the output projection's logits
    pad_id: int = PAD_ID          # pads batches; masked out of attention and the loss
    eos_id: int = EOS_ID          # ends every source and every finished output
    unk_id: int = UNK_ID          # an unknown piece
    decoder_start_id: int = BOS_ID  # the decoder's first input (BOS here; Marian starts with its pad id)

    def __post_init__(self) -> None:
        for name, limit in MODEL_LIMITS.items():     # a config.json read from disk may say anything
            value, low = getattr(self, name), MODEL_MINIMUMS.get(name, 1)
            if not _is_int(value) or not low <= value <= limit:
                raise ValueError(f"{name} must be an integer in [{low}, {limit:,}], not {value!r}")
        if self.max_len * self.d_model > MAX_POSITION_VALUES:
            raise ValueError(f"max_len x d_model = {self.max_len * self.d_model:,} exceeds {MAX_POSITION_VALUES:,} "
                             "(the positional table built when the model is made)")
        if not _is_int(self.pe_offset) or not 0 <= self.pe_offset <= MODEL_LIMITS["max_len"]:
            raise ValueError(f"pe_offset must be an integer in [0, {MODEL_LIMITS['max_len']:,}], not {self.pe_offset!r}")
        if self.pe_frequencies not in PE_FREQUENCIES:
            raise ValueError(f"pe_frequencies must be one of {', '.join(PE_FREQUENCIES)}, not {self.pe_frequencies!r}")
        if self.pe_frequencies == "fairseq" and (self.d_model % 2 or self.d_model < 4):
            raise ValueError(f"fairseq's sinusoids need an even d_model of at least 4, not {self.d_model}")
        both = min(self.src_vocab_size, self.tgt_vocab_size)
        for name, size, which in (("pad_id", both, "both vocabularies"), ("eos_id", both, "both vocabularies"),
                                  ("unk_id", both, "both vocabularies"),
                                  ("decoder_start_id", self.tgt_vocab_size, "the target vocabulary")):
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value < size:
                raise ValueError(f"{name} must be an integer id of {which} (0 to {size - 1}), not {value!r}")
        if self.eos_id in (self.pad_id, self.unk_id):       # the decoder may start with EOS (M2M100, NLLB)
            raise ValueError(f"eos_id ({self.eos_id}) must differ from pad_id and unk_id "
                             f"({self.pad_id}, {self.unk_id})")
        if self.unk_id == self.pad_id:
            raise ValueError(f"unk_id and pad_id must differ, both are {self.pad_id}")
        if self.activation not in ACTIVATION_NAMES:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATION_NAMES)}, not {self.activation!r}")
        if self.pe_layout not in PE_LAYOUTS:
            raise ValueError(f"pe_layout must be one of {', '.join(PE_LAYOUTS)}, not {self.pe_layout!r}")
        for name in ("norm_first", "tie_embeddings", "scale_embeddings", "final_logits_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if self.tie_output is not None and not isinstance(self.tie_output, bool):
            raise ValueError(f"tie_output must be true, false or null (as tie_embeddings), not {self.tie_output!r}")
        if not isinstance(self.pe_base, (int, float)) or not 1.0 < self.pe_base < 1e12:
            raise ValueError(f"pe_base must be a number in (1, 1e12), not {self.pe_base!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', not {self.positions!r}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("tie_embeddings needs src_vocab_size == tgt_vocab_size (a joint vocabulary)")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError("dropout must be in [0, 1)")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def special(self) -> SpecialIds:
        """The special ids this model reads and writes (decoding and text encoding use these)."""
        return SpecialIds(pad=self.pad_id, unk=self.unk_id, start=self.decoder_start_id, eos=self.eos_id)

    @property
    def output_tied(self) -> bool:
        """Whether the output projection is the target embedding matrix (tie_output, or when it is
        None, tie_embeddings: before tie_output existed, tie_embeddings tied all three)."""
        return self.tie_embeddings if self.tie_output is None else self.tie_output

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        """Build from a dict, refusing unknown keys (a typo must not silently become a default)."""
        return _from_dict(cls, data)


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


PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(d_model=128, n_heads=4, d_ff=512, n_encoder_layers=2, n_decoder_layers=2),
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3),
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6),
}


# The paper's Table 3 sizes ("Attention Is All You Need", Vaswani et al. 2017) with the 37,000-token
# shared source-target BPE vocabulary of its WMT 2014 English-German setup (section 5.1), embeddings
# and output projection tied (section 3.4); `stated` is the parameter count Table 3 prints.
PAPER_MODELS: dict[str, dict[str, int]] = {
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, stated=65_000_000),
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, stated=213_000_000),
}
PAPER_VOCAB = 37_000


def paper_config(name: str) -> ModelConfig:
    """The paper's base or big model as a ModelConfig: Table 3's sizes, the 37k shared vocabulary,
    tied embeddings and output projection, sinusoidal positions, post-norm, ReLU."""
    sizes = {k: v for k, v in PAPER_MODELS[name].items() if k != "stated"}
    return ModelConfig(src_vocab_size=PAPER_VOCAB, tgt_vocab_size=PAPER_VOCAB, tie_embeddings=True, **sizes)


def preset(name: str, **overrides: Any) -> ModelConfig:
    """A named preset with fields overridden (e.g. the vocabulary size of a tokenizer)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides})


@dataclass
class TrainConfig:
    """Everything the trainer needs; saved as train_config.json in the run directory."""

    run_dir: str = "runs/numbers"
    dataset: str = "numbers"          # numbers | bible | path to a .tsv | src.txt,tgt.txt | hf:<name>
    preset: str = "tiny"
    init_from: str | None = None      # checkpoint directory to fine-tune from
    vocab_size: int = 8000
    tokenizer_type: str = "bpe"       # bpe | unigram | word
    max_steps: int = 2000
    epochs: float | None = None       # if set, overrides max_steps
    batch_tokens: int = 4000          # padded tokens per side per batch
    accum_steps: int = 1
    warmup: int = 400
    lr_factor: float = 1.0
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    dropout: float | None = None
    bf16: bool = False
    log_every: int = 10               # steps per metrics.jsonl train record (loss = mean over them)
    eval_every: int = 200
    save_every: int = 500
    keep_last: int = 3
    eval_sentences: int = 200
    seed: int = 1234
    device: str = "auto"
    max_len: int = 256
    threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Build from a dict (a run's train_config.json, a --config file), refusing unknown keys, values
        of another type and numbers no run can use, each with its field named: the trainer, the Train
        and Schedule pages and resume all compute with these (warmup 0 divided by zero on the Schedule
        page, warmup "abc" raised a TypeError there). The trainer's upper limits are its own
        (training.args.validate)."""
        data = {k: v for k, v in data.items() if k not in _RETIRED_TRAIN_KEYS}
        cfg = _from_dict(cls, data)
        check_train_fields(cfg)
        return cfg


# Keys a run's train_config.json may hold from before they were retired, read and left: src_lang and tgt_lang
# were never used (a model took its corpus's languages; a TSV's header names them: explorer.data.files).
_RETIRED_TRAIN_KEYS = ("src_lang", "tgt_lang")


@dataclass(frozen=True)
class DecodeConfig:
    """How to turn a source sentence into a translation.

    Ranges are checked here, so a bad value from a form fails where it is made, with the allowed
    range in the message; limits that depend on the model (vocabulary, max_len) are checked when
    decoding. `n_best` above `beam_size` is not an error: beam search returns min(n_best, beam_size).
    """

    strategy: str = "beam"            # greedy | beam | sample
    beam_size: int = 5
    n_best: int = 5
    max_len_a: float = 1.0            # max target length = a * src_len + b (src_len counts EOS)
    max_len_b: int = 50
    min_len: int = 0                  # EOS is forbidden before this many output tokens
    length_penalty: str = "gnmt"      # none | average | gnmt
    alpha: float = 0.6                # GNMT exponent: lp = ((5 + len) / 6) ** alpha
    early_stopping: bool = False      # False: canonical stop (no live hypothesis can beat the worst
                                      # finished one); True: stop when beam_size hypotheses finished
    temperature: float = 1.0
    top_k: int = 0                    # 0 = no top-k filter
    top_p: float = 1.0                # 1 = no nucleus filter
    seed: int = 0
    trace_top_k: int = 5              # alternatives recorded per live hypothesis in a BeamTrace

    def __post_init__(self) -> None:
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        need(self.strategy in ("greedy", "beam", "sample"),
             f"strategy must be one of greedy, beam, sample, not {self.strategy!r}")
        need(_is_int(self.beam_size) and 1 <= self.beam_size <= MAX_BEAM,
             f"beam_size must be an integer in [1, {MAX_BEAM}], not {self.beam_size!r}")
        need(_is_int(self.n_best) and 1 <= self.n_best <= MAX_BEAM,
             f"n_best must be an integer in [1, {MAX_BEAM}], not {self.n_best!r}")
        need(isinstance(self.max_len_a, (int, float)) and 0.0 <= self.max_len_a <= 10.0,
             f"max_len_a must be in [0, 10], not {self.max_len_a!r}")
        need(_is_int(self.max_len_b) and 0 <= self.max_len_b <= MAX_DECODE_LEN,
             f"max_len_b must be an integer in [0, {MAX_DECODE_LEN}], not {self.max_len_b!r}")
        need(self.max_len_a > 0 or self.max_len_b >= 1,
             "max length a * src_len + b must allow at least 1 token (max_len_a > 0 or max_len_b >= 1)")
        need(_is_int(self.min_len) and 0 <= self.min_len <= MAX_DECODE_LEN,
             f"min_len must be an integer in [0, {MAX_DECODE_LEN}], not {self.min_len!r}")
        need(self.length_penalty in ("none", "average", "gnmt"),
             f"length_penalty must be one of none, average, gnmt, not {self.length_penalty!r}")
        need(isinstance(self.alpha, (int, float)) and 0.0 <= self.alpha <= 5.0,
             f"alpha must be in [0, 5], not {self.alpha!r}")
        need(isinstance(self.temperature, (int, float)) and 0.0 < self.temperature <= 100.0,
             f"temperature must be in (0, 100], not {self.temperature!r}")
        need(_is_int(self.top_k) and self.top_k >= 0,
             f"top_k must be an integer >= 0 (0 = off), not {self.top_k!r}")
        need(isinstance(self.top_p, (int, float)) and 0.0 < self.top_p <= 1.0,
             f"top_p must be in (0, 1], not {self.top_p!r}")
        need(_is_int(self.seed), f"seed must be an integer, not {self.seed!r}")
        need(_is_int(self.trace_top_k) and 0 <= self.trace_top_k <= 100,
             f"trace_top_k must be an integer in [0, 100], not {self.trace_top_k!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodeConfig":
        return _from_dict(cls, data)


# The library's limits on a decode. A beam of k ranks 2k candidates per step, and a BeamTrace keeps
# them all: far beyond the sizes translation uses (4-12), k only buys time and memory. Interfaces may
# cap lower (the app's sliders do, see webapp/decode_form.py and the Beam page), never higher.
MAX_BEAM = 64                     # beam_size and n_best
MAX_DECODE_LEN = 4096             # max_len_b and min_len, in tokens


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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
    if _is_int(value):
        return "int" in kinds or "float" in kinds
    return isinstance(value, float) and "float" in kinds


def check_train_fields(cfg: "TrainConfig") -> None:
    """Each field of its type, and no number any run can refuse to use (_TRAIN_RANGES): ValueError naming it."""
    for f in fields(cfg):
        if not _of_type(getattr(cfg, f.name), str(f.type)):
            raise ValueError(f"{f.name} must be {f.type}, not {getattr(cfg, f.name)!r}")
    for name, out_of_range, what in _TRAIN_RANGES:
        if out_of_range(getattr(cfg, name)):
            raise ValueError(f"{name} must be {what}, not {getattr(cfg, name)!r}")


def _from_dict(cls, data: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} key(s): {', '.join(unknown)}")
    return cls(**data)
