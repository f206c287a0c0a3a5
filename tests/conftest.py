"""Shared fixtures: a tiny model with a small vocabulary, a padded batch, a tokenizer stand-in.

Everything is small so the whole foundation suite runs in seconds on two busy CPU cores.
"""
from __future__ import annotations

import os
import tempfile

import pytest
import torch

# Corpora the tests build (numbers, Bible) are cached in a temporary folder, never in the repository's
# data/; set here, before any test runs, so trainer subprocesses and app servers inherit it.
os.environ.setdefault("EXPLORER_DATA_DIR", tempfile.mkdtemp(prefix="explorer-test-data-"))

from support.model_helpers import BOS, EOS, PAD, SEED, VOCAB, FakeTokenizer, Transformer, make_model  # noqa: F401


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
    """A tokenizer stand-in, also installed as what checkpoint loading reads tokenizers with."""
    from explorer.store import checkpoint
    monkeypatch.setattr(checkpoint, "_tokenizer_loader", lambda: FakeTokenizer.load)
    return FakeTokenizer()
