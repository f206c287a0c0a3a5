"""A word's training concordance: the shipped training pairs read within bounds, and the search that finds
a word's pairs, checked against a plain inverted index of words() (the definition it must agree with)."""
from __future__ import annotations

import lzma
import random
from collections import defaultdict

import pytest

from explorer.data.types import Pair
from explorer.files import limits
from explorer.studies.common import training_data
from explorer.studies.common.training_data import dataset_pairs as training_pairs
from explorer.studies.grounding.concordance import WordPairs
from explorer.studies.common.words import words


def _index(texts: list[str]) -> dict[str, list[int]]:
    """word -> the sentences whose words() hold it: the plain second implementation."""
    found: dict[str, list[int]] = defaultdict(list)
    for i, text in enumerate(texts):
        for w in dict.fromkeys(words(text)):
            found[w].append(i)
    return found


def test_shipped_training_pairs_are_read_within_bounds_and_refused_when_damaged(tmp_path, monkeypatch):
    good = tmp_path / "good.xz"
    good.write_bytes(lzma.compress("ref\tsrc\ttgt\nGen.1.1\tLuz.\tLight.\n".encode()))
    assert training_data._read_shipped(good)[0].tgt == "Light."
    (tmp_path / "cut.xz").write_bytes(good.read_bytes()[:20])
    (tmp_path / "junk.xz").write_bytes(b"not xz at all")
    monkeypatch.setattr(limits, "PAIRS_BYTES", 1000)
    (tmp_path / "big.xz").write_bytes(lzma.compress(b"ref\tsrc\ttgt\n" + b"a\tb\tc\n" * 10_000))   # 60 KB inflated
    for name, said in (("cut.xz", "truncated"), ("junk.xz", "not an xz file"), ("big.xz", "more than 1,000 bytes")):
        with pytest.raises(training_data.PairsUnusable, match=said):
            training_data._read_shipped(tmp_path / name)


def test_a_concordance_counts_pairs_and_lists_those_with_the_partner():
    pairs = WordPairs([Pair("el presidente habló", "the governor spoke", "a"), Pair("el rey", "the king", "b"),
                       Pair("Presidente y rey", "governor and king", "c"), Pair("el presidente", "the president", "d")])
    found = pairs.concordance("presidente", "source", "governor")
    assert (found.pairs, found.together, [r.ref for r in found.rows]) == (3, 2, ["a", "c"])
    alone = pairs.concordance("King", "output")
    assert (alone.pairs, alone.partner, [r.ref for r in alone.rows]) == (2, None, ["b", "c"])
    assert pairs.concordance("nowhere", "source").pairs == 0


# Each word here also stands inside another word on some other line, where a search must not find it.
TRICKY = ["de", "o'de", "desde", "de'", "'de", "3de", "33", "3", "d'affaires", "affaires", "snake_de",
          "daughter’s", "daughter", "s", "dé", "de\u0301", "DE", "x²", "x", "²", "ΣΟΦΙΑ", "σοφία", "", "de\tde",
          "Über-über", "12'de", "İstanbul", "istanbul"]


@pytest.mark.parametrize("shifted", [False, True])
def test_the_search_finds_exactly_the_sentences_whose_words_hold_the_word(shifted):
    """Apostrophes, digits beside letters, combining accents, underscores; with a dotted capital I in the
    text (shifted) lowercasing changes its length, and the search runs over words() instead."""
    texts = [t for t in TRICKY if shifted or "İ" not in t]
    pairs = WordPairs([Pair(t, t[::-1], str(i)) for i, t in enumerate(texts)])
    for side, sentences in (("source", texts), ("output", [t[::-1] for t in texts])):
        index = _index(sentences)
        for word in _index(texts + [t[::-1] for t in texts]):
            having = index.get(word, [])
            assert pairs.having(word, side).tolist() == having, (side, word)
    assert pairs.having("", "source").tolist() == []


def test_the_search_agrees_with_an_index_over_the_shipped_bible_pairs():
    """The 40 commonest words of each side and 300 drawn at random (a fixed seed): the counts the app shows."""
    train = training_pairs("bible")
    pairs = WordPairs(train)
    for side, sentences in (("source", [p.src for p in train]), ("output", [p.tgt for p in train])):
        index = _index(sentences)
        common = sorted(index, key=lambda w: -len(index[w]))[:40]
        for word in common + random.Random(0).sample(sorted(index), 300):
            assert pairs.having(word, side).tolist() == index[word], (side, word)
