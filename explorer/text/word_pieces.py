"""How the tokenizer cuts each word of a sentence, and which words it cuts into many pieces.

A word the tokenizer splits into many pieces is one its vocabulary barely knows (rare, misspelt,
from another period or domain): the model reads it as fragments, and a bad translation often
starts there. Each whitespace-separated word is encoded on its own; sentencepiece (both kinds of
tokenizer here) never joins pieces across a space, so these are the pieces the sentence gets.
Only pieces holding a letter or digit count towards a split: "astuta," is ▁ast + ut + a + ",",
three pieces of word and a comma, and the comma says nothing about how well the word is known.
"""
from __future__ import annotations

from dataclasses import dataclass

HEAVY_SPLIT = 4                  # a word cut into this many pieces or more counts as heavily split
MAX_WORDS = 1000                 # words looked at (the app's 2,000 characters hold fewer)


@dataclass(frozen=True)
class WordPieces:
    word: str
    ids: list[int]
    pieces: list[str]

    @property
    def n_word_pieces(self) -> int:
        """Pieces holding a letter or digit (punctuation and a lone word-start marker do not count)."""
        return sum(1 for p in self.pieces if any(ch.isalnum() for ch in p))


def word_pieces(tokenizer, text: str, side: str = "src") -> list[WordPieces]:
    """Each word of `text` (split on whitespace) with its ids and pieces on `side`. The tokenizer
    needs encode(text, side) and id_to_piece(id, side). What it puts before any text (a multilingual
    tokenizer's language tag: the ids of "") belongs to the sentence, not to each word: left out."""
    found = []
    tag = len(tokenizer.encode("", side=side))
    for word in text.split()[:MAX_WORDS]:
        ids = [int(i) for i in tokenizer.encode(word, side=side)][tag:]
        found.append(WordPieces(word=word, ids=ids, pieces=[tokenizer.id_to_piece(i, side) for i in ids]))
    return found


def heavily_split(tokenizer, text: str, side: str = "src", threshold: int = HEAVY_SPLIT) -> list[WordPieces]:
    """The words of `text` cut into `threshold` pieces or more, in order (each distinct word once)."""
    seen, out = set(), []
    for item in word_pieces(tokenizer, text, side):
        if item.n_word_pieces >= threshold and item.word not in seen:
            seen.add(item.word)
            out.append(item)
    return out
