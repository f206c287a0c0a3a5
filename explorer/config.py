"""Configuration dataclasses and named presets.

Every size lives in ModelConfig, which is stored verbatim in each checkpoint's config.json, so a
checkpoint always says exactly which model it holds (nanoGPT style). Presets are plain
ModelConfig values; `preset(name, **overrides)` is how code and the CLI get one.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any


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
    tie_embeddings: bool = True   # share src/tgt embeddings and generator (needs one vocabulary)
    pad_id: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', not {self.positions!r}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("tie_embeddings needs src_vocab_size == tgt_vocab_size (a joint vocabulary)")
        for name in ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError("dropout must be in [0, 1)")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

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
    src_lang: str = "en"
    tgt_lang: str = "de"
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
        return _from_dict(cls, data)


@dataclass(frozen=True)
class DecodeConfig:
    """How to turn a source sentence into a translation."""

    strategy: str = "beam"            # greedy | beam | sample
    beam_size: int = 5
    n_best: int = 5
    max_len_a: float = 1.0            # max target length = a * src_len + b
    max_len_b: int = 50
    length_penalty: str = "gnmt"      # none | average | gnmt
    alpha: float = 0.6
    early_stopping: bool = False      # True: stop when beam_size hypotheses finished
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    trace_top_k: int = 5              # alternatives recorded per live hypothesis in a BeamTrace

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _from_dict(cls, data: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} key(s): {', '.join(unknown)}")
    return cls(**data)
