"""Shared by the decoding tests: a tiny model trained for a few seconds on a toy task, and a
stand-in tokenizer with the interface of explorer.text.tokenizer (encode / decode / id_to_piece)."""
from __future__ import annotations

import functools

import pytest
import torch

from explorer.config import ModelConfig
from explorer.model import Transformer

VOCAB = 24                      # 0-3 specials, 4..23 symbols
SYMBOLS = range(4, VOCAB)


def tiny_config(**overrides) -> ModelConfig:
    base = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=64, n_heads=4, d_ff=128,
                n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=40)
    return ModelConfig(**{**base, **overrides})


def random_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()


def toy_pairs(n: int, generator: torch.Generator, task: str = "reverse") -> list[tuple[list[int], list[int]]]:
    """Reverse task: source a b c -> target c b a; copy task: a b c -> a b c (both without EOS)."""
    pairs = []
    for _ in range(n):
        length = int(torch.randint(3, 9, (1,), generator=generator))
        src = torch.randint(4, VOCAB, (length,), generator=generator).tolist()
        pairs.append((src, src[::-1] if task == "reverse" else list(src)))
    return pairs


def train_reverse_model(steps: int = 150, seed: int = 0, task: str = "reverse") -> Transformer:
    """A few seconds of Adam on the reverse (or copy) task: enough for confident, mostly right outputs."""
    torch.manual_seed(seed)
    model = Transformer(tiny_config())
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    model.train()
    for _ in range(steps):
        pairs = toy_pairs(64, gen, task)
        src = _pad([s + [3] for s, _ in pairs])                                 # [B, S]
        tgt = _pad([[2] + t + [3] for _, t in pairs])                           # [B, T+1]
        log_probs = model(src, tgt[:, :-1])                                     # [B, T, V]
        loss = torch.nn.functional.nll_loss(log_probs.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.final_loss = float(loss.detach())
    return model.eval()


def _pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r)
    return out


class StandInTokenizer:
    """Words 'a'..'t' <-> ids 4..23; the real tokenizer (sentencepiece) has the same methods."""

    SPECIAL = {0: "<pad>", 1: "<unk>", 2: "<s>", 3: "</s>"}

    def encode(self, text: str, side: str = "src") -> list[int]:
        return [4 + ord(w) - ord("a") if len(w) == 1 and "a" <= w <= "t" else 1 for w in text.split()]

    def pieces(self, text: str, side: str = "src") -> list[str]:
        return [self.id_to_piece(i, side) for i in self.encode(text, side)]

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        return self.SPECIAL.get(i, chr(ord("a") + i - 4))

    def decode(self, ids: list[int], side: str = "tgt") -> str:
        return " ".join(self.id_to_piece(i, side) for i in ids if i > 3)


@functools.lru_cache(maxsize=1)
def _trained_once() -> Transformer:
    torch.set_num_threads(1)
    return train_reverse_model()


@pytest.fixture
def trained() -> Transformer:
    """Import into a test module; every module gets the same model, trained once per process
    (a fixture imported into several modules would otherwise be set up once per module)."""
    return _trained_once()


@pytest.fixture(scope="session")
def sources() -> list[list[int]]:
    return [src + [3] for src, _ in toy_pairs(24, torch.Generator().manual_seed(7))]
