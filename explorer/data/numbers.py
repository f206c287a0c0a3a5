"""English number words -> German number words, generated with num2words.

The fast demo task: a tiny model learns it in about two minutes on two CPU cores, and German puts
units before tens ("twenty one" -> "ein und zwanzig"), so cross-attention shows crossing lines.

Token conventions (whitespace-separated, so a word-level tokenizer fits exactly):
* English: num2words' British style with hyphens and commas removed:
  1234 -> "one thousand two hundred and thirty four" (the comma carries no information the words
  do not already carry, and dropping it keeps every token a word);
* German: num2words writes one compound ("eintausendzweihundertvierunddreißig"); we split it into
  morphemes with a longest-first regex: "ein tausend zwei hundert vier und dreißig".
  `join_german` removes the spaces and gives num2words' word back exactly.

Numbers are sampled deterministically from a seed. Dev and test never share a number with train
or with each other; every number below 100 is kept for training (they are the vocabulary the
rest is composed of), and held-out numbers are spread evenly over 3- to 6-digit numbers.
"""
from __future__ import annotations

import random
import re
from functools import lru_cache

from explorer.data.types import ParallelCorpus, Pair

MAX_NUMBER = 999_999
_MORPHEMES = ["sechzehn", "siebzehn", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig",
              "siebzig", "achtzig", "neunzig", "hundert", "tausend", "sieben", "sechs", "eins",
              "ein", "zwei", "drei", "vier", "fünf", "acht", "neun", "zehn", "elf", "zwölf",
              "und", "null"]
# Longest first, so "sechzehn" is never read as "sechs"+... nor "eins" as "ein"+"s".
_GERMAN_MORPHEME = re.compile("|".join(sorted(_MORPHEMES, key=len, reverse=True)))


def _n2w(n: int, lang: str) -> str:
    """num2words(n, lang=lang) for 0 <= n <= MAX_NUMBER, through _converter's copy of its converter."""
    return _converter(lang).to_cardinal(n)


@lru_cache(maxsize=None)
def _converter(lang: str):
    """num2words' converter for `lang` (what num2words(n, lang=lang) calls to_cardinal on), copied with only
    the number words up to MAX_NUMBER. Its splitnum walks every number word from the largest (10^600 in
    German) down, skipping those above the value, for each of the 7-odd parts of a number: 70% of the
    numbers corpus's build (30 s of 50,000 pairs). Those it skips are all it loses, so every word is
    num2words' own (tests/unit/test_data.py checks them against num2words)."""
    import copy
    from collections import OrderedDict
    from num2words import CONVERTER_CLASSES   # here: 50 ms to import, and only the numbers corpus needs it
    converter = copy.copy(CONVERTER_CLASSES[lang])
    converter.cards = OrderedDict((value, word) for value, word in converter.cards.items() if value <= MAX_NUMBER)
    return converter


def split_german(word: str) -> str:
    """"einundzwanzig" -> "ein und zwanzig"; raises ValueError if a piece is not a morpheme."""
    pieces, pos = [], 0
    for m in _GERMAN_MORPHEME.finditer(word):
        if m.start() != pos:
            break
        pieces.append(m.group(0))
        pos = m.end()
    if pos != len(word):
        raise ValueError(f"cannot split German number word {word!r} at {word[pos:]!r}")
    return " ".join(pieces)


def join_german(text: str) -> str:
    """"ein und zwanzig" -> "einundzwanzig" (num2words' spelling)."""
    return text.replace(" ", "")


def english_words(n: int) -> str:
    """1234 -> "one thousand two hundred and thirty four"."""
    return " ".join(_n2w(n, "en").replace("-", " ").replace(",", " ").split())


def german_words(n: int) -> str:
    """1234 -> "ein tausend zwei hundert vier und dreißig"."""
    return split_german(_n2w(n, "de"))


@lru_cache(maxsize=200_000)
def number_pair(n: int) -> Pair:
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"numbers task covers 0..{MAX_NUMBER}, got {n}")
    return Pair(english_words(n), german_words(n), f"n={n}")


def _by_digits(rng: random.Random, digits: int) -> int:
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(lo, 10 ** digits - 1)


def sample_numbers(seed: int = 1234, train_size: int = 50_000, dev_size: int = 500,
                   test_size: int = 500) -> tuple[list[int], list[int], list[int]]:
    """Disjoint train / dev / test numbers (see the module docstring for the mix)."""
    rng = random.Random(seed)
    held: list[int] = []
    seen: set[int] = set()
    while len(held) < dev_size + test_size:
        n = _by_digits(rng, rng.randint(3, 6))
        if n not in seen:
            seen.add(n)
            held.append(n)
    dev, test = held[:dev_size], held[dev_size:]
    train = [n for n in range(1000) if n not in seen][:train_size]
    taken = seen | set(train)
    while len(train) < train_size:
        n = _by_digits(rng, rng.randint(4, 6))
        if n not in taken:
            taken.add(n)
            train.append(n)
    rng.shuffle(train)
    return train, dev, test


def build_numbers(seed: int = 1234, train_size: int = 50_000, dev_size: int = 500,
                  test_size: int = 500) -> ParallelCorpus:
    """The numbers corpus; about 3 s for the defaults on one core."""
    train, dev, test = sample_numbers(seed, train_size, dev_size, test_size)
    return ParallelCorpus("numbers", "en", "de",
                          [number_pair(n) for n in train],
                          [number_pair(n) for n in dev],
                          [number_pair(n) for n in test])
