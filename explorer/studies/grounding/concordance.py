"""A checkpoint's training pairs, readable on any machine, and a word's concordance in them: which
training pairs have it, with the word (and on the other side the word it brings along) found.

Where the pairs come from: checkpoints/grounding/<dataset key>.train.tsv.xz when the repository ships
them (the Bible's 28,627 training verses: 1.8 MB; both translations are in the public domain), so
`make run` has the concordance without the Bible packages; else the checkpoint's dataset itself (the
numbers are generated, a fine-tune's TSV is on disk). The shipped file is read through the bounded
reader and decompressed to at most limits.PAIRS_BYTES, and must equal the dataset's training split (a
test rebuilds it).

A concordance is a lookup in an inverted index, word -> training pairs, built once per dataset (one pass
of words() over both sides: about a second for the Bible).
"""
from __future__ import annotations

import hashlib
import lzma
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from explorer.data import DataError, load_corpus
from explorer.data.files import parse_tsv
from explorer.data.types import Pair
from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING
from explorer.files.user_files import UserFileError, read_user_file
from explorer.store.run_paths import shipped_root
from explorer.studies.grounding.words import words

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
    """word -> the training pairs with it, per side (src, tgt), for one dataset's training split."""

    def __init__(self, pairs: Sequence[Pair]):
        self.pairs = list(pairs)
        self.src: dict[str, list[int]] = defaultdict(list)
        self.tgt: dict[str, list[int]] = defaultdict(list)
        for i, pair in enumerate(self.pairs):
            for w in dict.fromkeys(words(pair.src)):
                self.src[w].append(i)
            for w in dict.fromkeys(words(pair.tgt)):
                self.tgt[w].append(i)

    def concordance(self, word: str, side: str, partner: str | None = None, shown: int = SHOWN) -> Concordance:
        """The training pairs with `word` on `side` ("source" or "output"), and with `partner` on the
        other side when given (an output word's linking source word, a source word's linked output word)."""
        key = (words(word) or [""])[0]
        mine, other = (self.src, self.tgt) if side == "source" else (self.tgt, self.src)
        having = mine.get(key, [])
        partner_key = (words(partner) or [""])[0] if partner else None
        both = sorted(set(having) & set(other.get(partner_key, []))) if partner_key else []
        listed = both if partner_key else having
        rows = tuple(Row(i, self.pairs[i].ref, self.pairs[i].src, self.pairs[i].tgt) for i in listed[:shown])
        return Concordance(key, side, len(having), partner_key, len(both), rows)
