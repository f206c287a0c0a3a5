"""A checkpoint's training pairs, readable on any machine, and a word's concordance in them: which
training pairs have it, with the word (and on the other side the word it brings along) found.

Where the pairs come from: checkpoints/grounding/<dataset key>.train.tsv.xz when the repository ships
them (the Bible's 28,627 training verses: 1.8 MB; both translations are in the public domain), so
`make run` has the concordance without the Bible packages; else the checkpoint's dataset itself (the
numbers are generated, a fine-tune's TSV is on disk). The shipped file is read through the bounded
reader and decompressed to at most limits.PAIRS_BYTES, and must equal the dataset's training split (a
test rebuilds it).

A concordance is a search of one side's text for the word (WordPairs says how, and why not an index).
"""
from __future__ import annotations

import hashlib
import lzma
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from explorer.data import DataError, load_corpus
from explorer.data.files import parse_tsv
from explorer.data.types import Pair
from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING
from explorer.files.user_files import UserFileError, read_user_file
from explorer.store.run_paths import shipped_root
from explorer.studies.grounding.words import finder, plain, words

SHOWN = 20                 # training pairs a concordance lists (the count says how many there are)


class PairsUnusable(ValueError):
    """The shipped training pairs cannot be read; the message says why in one line."""


def shipped_pairs_path(dataset: str) -> Path:
    return shipped_root() / GROUNDING / f"{hashlib.sha256(dataset.encode()).hexdigest()[:16]}.train.tsv.xz"


def write_shipped(dataset: str) -> Path:
    """The dataset's training split as the repository ships it (a header, then ref, src, tgt per line)."""
    train = load_corpus(dataset).train
    text = "ref\tsrc\ttgt\n" + "".join(f"{p.ref}\t{p.src}\t{p.tgt}\n" for p in train)
    path = shipped_pairs_path(dataset)
    write_bytes_atomic(path, lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    return path


def _read_shipped(path: Path) -> list[Pair]:
    try:
        data = read_user_file(path, limits.INDEX_BYTES, inside=path.parent)
    except UserFileError as err:
        raise PairsUnusable(str(err)) from None
    inflater = lzma.LZMADecompressor()
    try:
        text = inflater.decompress(data, limits.PAIRS_BYTES)
    except lzma.LZMAError as exc:
        raise PairsUnusable(f"{path}: not an xz file ({exc})") from None
    if not inflater.eof:
        raise PairsUnusable(f"{path}: truncated, or inflates to more than {limits.PAIRS_BYTES:,} bytes")
    try:
        return parse_tsv(text, str(path))
    except DataError as err:
        raise PairsUnusable(str(err)) from None


def training_pairs(dataset: str) -> list[Pair]:
    """The dataset's training split: the shipped copy when there is one, else the dataset read here
    (DataError when it cannot be: the Bible without its packages and without a shipped copy)."""
    path = shipped_pairs_path(dataset)
    if path.is_file():
        return _read_shipped(path)
    return list(load_corpus(dataset).train)


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
