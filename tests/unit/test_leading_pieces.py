"""explorer.text.encoding.leading_pieces: a long text is encoded from a prefix, and the ids kept are the
whole text's (a test line of a million words once cost a gigabyte before it was cut to max_len)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from explorer.text.encoding import output_ids, source_ids, target_ids
from explorer.text.special import DEFAULT_IDS
from explorer.text.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.load(str(ROOT / "checkpoints" / "bible-es-en"))


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    vocab = ["y", "dijo", "Dios", "sea", "la", "luz", "tierra,", "cielos.", "Jehová", "¿por qué?", "x" * 40,
             "aguas", "en\tel", "principio", "creó", "  ", "noche;", "día"]
    return " ".join(rng.choice(vocab) for _ in range(n))


@pytest.mark.parametrize("max_len", [3, 8, 40, 256])
@pytest.mark.parametrize("seed", range(4))
def test_the_ids_kept_are_the_whole_texts(tokenizer, max_len, seed):
    text = _words(seed, 2_000)
    whole_src = tokenizer.encode(text, side="src")
    whole_tgt = tokenizer.encode(text, side="tgt")
    assert source_ids(tokenizer, text, max_len) == whole_src[:max_len - 1] + [DEFAULT_IDS.eos]
    assert output_ids(tokenizer, text, max_len)[:-1] == whole_tgt[:max_len - 1]
    assert target_ids(tokenizer, text, max_len)[1:-1] == whole_tgt[:max_len - 2]


class _Counting:
    """A tokenizer that records how much text it was asked to encode: one id per character."""

    def __init__(self):
        self.read = 0

    def encode(self, text, side="src"):
        self.read += len(text)
        return [5] * len(text.replace(" ", ""))


def test_a_huge_line_is_read_only_as_far_as_the_kept_pieces():
    counting = _Counting()
    huge = "palabra " * 1_000_000                      # 8 MB of text, 1M words
    ids = source_ids(counting, huge, 64)
    assert len(ids) == 64
    assert counting.read < 10_000                      # the old code encoded all 8,000,000 characters


def test_one_endless_word_is_cut_too():
    counting = _Counting()
    ids = source_ids(counting, "a" * 5_000_000, 16)
    assert len(ids) == 16 and counting.read < 2_000


def test_short_texts_are_encoded_whole():
    counting = _Counting()
    assert source_ids(counting, "uno dos tres", 64) == [5] * 10 + [DEFAULT_IDS.eos]
    assert counting.read == len("uno dos tres")
