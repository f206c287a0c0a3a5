"""A word's concordance in a checkpoint's training pairs (explorer.studies.common.training_data reads
them, on any machine): which training pairs have it, with the word (and on the other side the word it
brings along) found.

A concordance is a search of one side's text for the word (WordPairs says how, and why not an index).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.data.types import Pair
from explorer.studies.common.words import finder, plain, words

SHOWN = 20                 # training pairs a concordance lists (the count says how many there are)


@dataclass(frozen=True)
class Row:
    index: int                 # the pair's place in the training split
    ref: str                   # where it is from ("Gen.1.1", "n=21", "data.tsv:7")
    src: str
    tgt: str


@dataclass(frozen=True)
class Concordance:
    word: str
    side: str                  # "source" or "output": where the word was clicked
    pairs: int                 # training pairs whose side has the word
    partner: str | None        # the other side's word looked for beside it (the link), if any
    together: int              # training pairs with both (0 without a partner)
    rows: tuple[Row, ...]      # the first SHOWN pairs with both (with a partner), else with the word


class WordPairs:
    """The training pairs with, per side, their text in one string, searched per word: which training
    pairs have a word on the source or the output side.

    Why a search and not an inverted index: splitting the Bible's 57,254 sentences into words takes two
    seconds in Python, and a person waits for it on their first click; lowercasing the joined text takes
    a few milliseconds, and a regular expression that starts with the word's letters finds it in 5-60 ms.
    The expression asks what words() asks (no letter, nor a letter and an apostrophe, on either side; no
    digit beside a number), so the pairs found are the pairs whose words() hold the word (a test compares
    the two over the Bible's vocabulary). When lowercasing would change the text's length (a dotted
    capital I), the text is first rewritten as its words() between spaces, and the search is for the word
    between spaces.
    """

    def __init__(self, pairs: Sequence[Pair]):
        self.pairs = list(pairs)
        self._sides = {"source": _SideText([p.src for p in self.pairs]),
                       "output": _SideText([p.tgt for p in self.pairs])}

    def having(self, word: str, side: str) -> np.ndarray:
        """The indices (ascending) of the training pairs whose `side` has `word` (a words() key)."""
        return self._sides[side].having(word)

    def concordance(self, word: str, side: str, partner: str | None = None, shown: int = SHOWN) -> Concordance:
        """The training pairs with `word` on `side` ("source" or "output"), and with `partner` on the
        other side when given (an output word's linking source word, a source word's linked output word)."""
        key = (words(word) or [""])[0]
        other = "output" if side == "source" else "source"
        having = self.having(key, side)                                                   # [n] ascending
        partner_key = (words(partner) or [""])[0] if partner else None
        both = np.intersect1d(having, self.having(partner_key, other)) if partner_key else having[:0]
        listed = both if partner_key else having
        rows = tuple(Row(int(i), self.pairs[i].ref, self.pairs[i].src, self.pairs[i].tgt) for i in listed[:shown])
        return Concordance(key, side, len(having), partner_key, len(both), rows)


class _SideText:
    """One side's sentences as one lowercased string, a line each, and where each line ends."""

    def __init__(self, sentences: list[str]):
        joined = plain("\n".join(sentences))           # NFC does not compose across a line break
        text = joined.lower()
        self.spaced = len(text) != len(joined)          # lowercasing would move a word's edges: search words()
        if self.spaced:
            text = "\n".join(f" {' '.join(words(s))} " for s in sentences)
        self.text = text
        self.ends = np.array([m.start() for m in re.finditer("\n", text)], dtype=np.int64)    # [lines - 1]

    def having(self, key: str) -> np.ndarray:
        if not key:
            return np.zeros(0, dtype=np.int64)
        found = re.compile(re.escape(f" {key} ")) if self.spaced else finder(key)
        starts = np.fromiter((m.start() for m in found.finditer(self.text)), dtype=np.int64)  # [matches]
        return np.unique(np.searchsorted(self.ends, starts))                                 # [pairs]
