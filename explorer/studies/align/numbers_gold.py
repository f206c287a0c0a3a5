"""Gold alignments for the numbers task, exact by construction from the number grammar.

English and German number words have the same structure, so each English word's German
correspondents follow from the number itself (explorer.data.numbers writes both sides):
* a unit, a teen or a tens word links sure to its German morpheme(s): "five" - "fünf",
  "fourteen" - "vier" "zehn" (the German teen is two morphemes, both sure), "sixteen" - "sechzehn";
* "hundred" - "hundert", "thousand" - "tausend", sure;
* German puts units before tens with "und" between: "twenty one" - "ein und zwanzig":
  "one" - "ein" and "twenty" - "zwanzig" sure, "und" possible with both;
* the British "and" ("three hundred and fourteen") has no German word: unaligned.

The words are built from the number and then compared with explorer.data.numbers' own rendering of
both sides; a difference raises (the tests check every held-out number), so a change to that
rendering cannot silently leave a wrong gold set behind.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from explorer.studies.align.gold import GoldPair, Link
from explorer.data.numbers import MAX_NUMBER, english_words, german_words

EN_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
            "nineteen"]
EN_TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}
DE_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
            "elf", "zwölf", "drei zehn", "vier zehn", "fünf zehn", "sechzehn", "siebzehn", "acht zehn",
            "neun zehn"]
DE_TENS = {2: "zwanzig", 3: "dreißig", 4: "vierzig", 5: "fünfzig", 6: "sechzig", 7: "siebzig", 8: "achtzig",
           9: "neunzig"}


@dataclass
class _Built:
    en: list[str] = field(default_factory=list)
    de: list[str] = field(default_factory=list)
    sure: set[Link] = field(default_factory=set)
    possible: set[Link] = field(default_factory=set)

    def word(self, en: str | None, de: str, possible_with: tuple[int, ...] = ()) -> int | None:
        """Append an English word (or none) and its German morphemes, linked sure; a German word with
        no English word of its own (und) is linked possible to the English indices given."""
        i = None
        if en is not None:
            i = len(self.en)
            self.en.append(en)
        for morpheme in de.split():
            j = len(self.de)
            self.de.append(morpheme)
            if i is not None:
                self.sure.add((i, j))
            for k in possible_with:
                self.possible.add((k, j))
        return i

    def english_only(self, en: str) -> None:
        self.en.append(en)


def _below_100(b: _Built, n: int, lone_one: str) -> None:
    """1..99; `lone_one` is how German writes a final 1 here ("eins" at the end, "ein" before a word)."""
    if n < 20:
        b.word(EN_UNITS[n], lone_one if n == 1 else DE_UNITS[n])
        return
    tens, unit = divmod(n, 10)
    if unit == 0:
        b.word(EN_TENS[tens], DE_TENS[tens])
        return
    # English "twenty one", German "ein und zwanzig": the unit's German comes first
    i_tens, i_unit = len(b.en), len(b.en) + 1
    b.en += [EN_TENS[tens], EN_UNITS[unit]]
    for morpheme, link in (("ein" if unit == 1 else DE_UNITS[unit], i_unit), ("und", None), (DE_TENS[tens], i_tens)):
        j = len(b.de)
        b.de.append(morpheme)
        if link is None:
            b.possible |= {(i_tens, j), (i_unit, j)}
        else:
            b.sure.add((link, j))


def _below_1000(b: _Built, n: int, final: bool) -> None:
    """1..999; `final`: nothing follows (a final 1 is "eins"), else "tausend" follows: "ein" there,
    except after a hundred, where num2words writes "eins" too ("dreihunderteinstausend")."""
    hundreds, rest = divmod(n, 100)
    if hundreds:
        b.word(EN_UNITS[hundreds], "ein" if hundreds == 1 else DE_UNITS[hundreds])
        b.word("hundred", "hundert")
        if rest:
            b.english_only("and")
    if rest:
        _below_100(b, rest, "eins" if final or hundreds else "ein")


def number_gold(n: int) -> GoldPair:
    """The gold pair of one number, checked against the corpus's own rendering of both sides."""
    if not 1 <= n <= MAX_NUMBER:
        raise ValueError(f"gold alignments cover 1..{MAX_NUMBER}, not {n}")
    b = _Built()
    thousands, rest = divmod(n, 1000)
    if thousands:
        _below_1000(b, thousands, final=False)
        b.word("thousand", "tausend")
        if 0 < rest < 100:
            b.english_only("and")               # British "one thousand and five"
    if rest:
        _below_1000(b, rest, final=True)
    en, de = english_words(n).split(), german_words(n).split()
    if (b.en, b.de) != (en, de):
        raise ValueError(f"number grammar and corpus disagree on {n}: {b.en} / {b.de} vs {en} / {de}")
    return GoldPair(src=b.en, tgt=b.de, sure=frozenset(b.sure), possible=frozenset(b.possible | b.sure))


def numbers_gold(numbers) -> list[GoldPair]:
    return [number_gold(int(n)) for n in numbers]
