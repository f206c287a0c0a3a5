"""Shared test helpers: a tiny model with a small vocabulary and a tokenizer stand-in.

A module of its own (not conftest) so tests can import it by name: tests/browser has a conftest too,
and two modules both called `conftest` cannot be imported side by side.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from explorer.config import preset
from explorer.model import Transformer
from explorer.text.special import BOS_ID as BOS, EOS_ID as EOS, PAD_ID as PAD, UNK_ID as UNK  # noqa: F401

VOCAB = 40
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


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small products: one thread is faster than two fighting other jobs for the machine's cores (a module
    that imports this fixture runs its tests with one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class IdTokenizer:
    """Text is space-separated ids (a tokenizer stand-in for analyses that read text)."""

    def encode(self, text, side="src"):
        return [int(t) for t in text.split()]

    def decode(self, ids, side="tgt"):
        return " ".join(str(int(i)) for i in ids)


SHIPPED_NUMBERS = Path(__file__).resolve().parents[2] / "checkpoints" / "numbers-en-de"


def short_numbers_copy(folder: Path, pairs: int) -> Path:
    """A copy of the shipped numbers-en-de in `folder` whose test.tsv keeps its header and `pairs` pairs: a
    whole test set, scored in moments (skips the test without the shipped checkpoint)."""
    import shutil

    if not (SHIPPED_NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoint numbers-en-de")
    shutil.copytree(SHIPPED_NUMBERS, folder)
    lines = (folder / "test.tsv").read_text(encoding="utf-8").splitlines()
    (folder / "test.tsv").write_text("\n".join(lines[:pairs + 1]) + "\n", encoding="utf-8")
    return folder
