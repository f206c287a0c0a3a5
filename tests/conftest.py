"""Shared fixtures: a tiny model with a small vocabulary, a padded batch, a tokenizer stand-in.

Everything is small so the whole foundation suite runs in seconds on two busy CPU cores.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from explorer.config import preset
from explorer.model import Transformer

VOCAB = 40
PAD, UNK, BOS, EOS = 0, 1, 2, 3          # the ids explorer.tokenizer fixes
SEED = 1234


def tiny_config(**overrides):
    """The `tiny` preset with a 40-token joint vocabulary, short max_len and no dropout."""
    return preset("tiny", **{"src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB, "max_len": 32,
                             "dropout": 0.0, **overrides})


def make_model(seed: int = SEED, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()


class FakeTokenizer:
    """Stand-in with the Tokenizer's checkpoint interface: save(dir) -> file names, load(dir)."""

    FILE = "fake_tokenizer.json"

    def __init__(self, vocab_size: int = VOCAB, joint: bool = True):
        self.src_vocab_size = self.tgt_vocab_size = vocab_size
        self.joint = joint

    def save(self, directory) -> list[str]:
        Path(directory, self.FILE).write_text(json.dumps({"vocab_size": self.src_vocab_size}))
        return [self.FILE]

    @classmethod
    def load(cls, directory) -> "FakeTokenizer":
        return cls(json.loads(Path(directory, cls.FILE).read_text())["vocab_size"])


@pytest.fixture
def seed() -> int:
    torch.manual_seed(SEED)
    return SEED


@pytest.fixture(scope="session")
def model() -> Transformer:
    """One shared tiny model (read-only, like the app's st.cache_resource model)."""
    return make_model()


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """(src [2, 6], tgt_in [2, 5]) with padding at the end of the second row of each."""
    src = torch.tensor([[5, 6, 7, 8, 9, EOS],
                        [10, 11, 12, EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 13, 14, 15, 16],
                           [BOS, 17, 18, PAD, PAD]])
    return src, tgt_in


@pytest.fixture
def fake_tokenizer(monkeypatch) -> FakeTokenizer:
    """A tokenizer stand-in, also installed as the class checkpoint loading uses."""
    from explorer import checkpoint
    monkeypatch.setattr(checkpoint, "_tokenizer_class", lambda: FakeTokenizer)
    return FakeTokenizer()
