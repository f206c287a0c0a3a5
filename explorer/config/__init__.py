"""Configuration dataclasses and named presets.

Every size lives in ModelConfig, which is stored verbatim in each checkpoint's config.json, so a
checkpoint always says exactly which model it holds (nanoGPT style). Presets are plain
ModelConfig values; `preset(name, **overrides)` is how code and the CLI get one.

The bounds on every field and the checks that apply them (MODEL_LIMITS, MAX_BEAM, ...) are in
explorer/config/checks.py; what a setting from outside may name (the memory one model may take, a folder
setting) is in explorer/files/settings.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from explorer.config.checks import check_decode, check_model, check_train_fields
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
        check_model(self)                 # a config.json read from disk may say anything

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
        check_decode(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodeConfig":
        return _from_dict(cls, data)


def _from_dict(cls, data: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} key(s): {', '.join(unknown)}")
    return cls(**data)
