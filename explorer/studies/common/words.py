"""The words the studies count (the grounding's verdict, the features' word detection): lowercased runs of letters (with an inner apostrophe) and of digits.

Why words, not the model's pieces: a verdict is read by people ("5 of 8 words never appear in the
training verses"), and a piece such as "▁de" is seen everywhere while the word it starts is not. Text is
NFC-normalised first, so "está" typed with a combining accent counts as the training data's "está", and
a typographic apostrophe is the plain one, so the model's "daughter’s" is the training data's "daughter's".
"""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

_LETTER = r"[^\W\d_]"
_WORD = re.compile(rf"{_LETTER}+(?:'{_LETTER}+)*|\d+")
_DIGITS = re.compile(r"\d+")
_WORD_OR_STOP = re.compile(_WORD.pattern + r"|[.!?¡¿:;«“\"(]")


def plain(text: str) -> str:
    """The text as words() reads it: NFC, with the typographic apostrophe written plain."""
    return unicodedata.normalize("NFC", str(text)).replace("’", "'")


def words(text: str) -> list[str]:
    """The lowercased words of `text`, in order (punctuation and spaces dropped)."""
    return [w.lower() for w in _WORD.findall(plain(text))]


def finder(key: str) -> re.Pattern:
    """Finds `key` (one of words()'s lowercase words) in lowercased plain() text exactly where words()
    would find it: not beside a letter, nor beside an apostrophe that joins it to one; a number not
    beside a digit. It starts with the word's own characters, so a search skips ahead fast."""
    k = re.escape(key)
    if _DIGITS.fullmatch(key):
        return re.compile(rf"{k}(?<!\d{k})(?!\d)")
    return re.compile(rf"{k}(?<!{_LETTER}{k})(?<!{_LETTER}'{k})(?!{_LETTER})(?!'{_LETTER})")


def names(text: str) -> set[int]:
    """Positions (in words()) of words written with a capital that do not open a sentence: names, which a
    model copies or spells out rather than translates, so that one unseen is no sign of unknown text."""
    found, opening, position = set(), True, 0
    for match in _WORD_OR_STOP.finditer(plain(text)):
        piece = match.group(0)
        if not _WORD.fullmatch(piece):                  # a sentence stop, an opening quote or bracket
            opening = True
            continue
        if piece[0].isupper() and not opening:
            found.add(position)
        opening = False
        position += 1
    return found


def bigrams(tokens: list[str]) -> list[str]:
    """Neighbouring word pairs, each as one string "a b" (the index's keys)."""
    return [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]


_SPECIAL = re.compile(r"<[^<>\s]+>")     # a tokenizer's own pieces: </s>, <unk>, <pad>, <s>


def span_word(pieces: Sequence[str], position: int) -> str:
    """The word (as words()) of the piece at `position`: its span runs from the piece that starts it ('▁').
    A tokenizer's own piece (</s>, <unk>, <pad>) is a span of its own and no word: the end of sentence after
    "twenty one" is not a piece of "one"."""
    if _SPECIAL.fullmatch(pieces[position]):
        return ""
    start = position
    while start > 0 and not pieces[start].startswith("▁") and not _SPECIAL.fullmatch(pieces[start - 1]):
        start -= 1
    end = position + 1
    while end < len(pieces) and not pieces[end].startswith("▁") and not _SPECIAL.fullmatch(pieces[end]):
        end += 1
    return (words("".join(pieces[start:end]).replace("▁", " ")) or [""])[0]
