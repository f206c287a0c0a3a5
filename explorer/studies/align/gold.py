"""Gold word alignments: one format everywhere, read as untrusted input.

A gold file holds one sentence pair per line:

    source words ||| target words ||| links

Words are whitespace-separated (the tokenisation is the file's: the model reads each side as its
words joined by single spaces). Links use the Pharaoh format of fast_align and awesome-align with
0-based word indices, source first: `i-j` is a sure link, `i?j` a possible one. As in Och & Ney 2003,
the possible set P includes the sure set S; a file lists a link once, with its strongest kind.
Blank lines are skipped and lines starting with `#` are comments (provenance, licence). The third
field may be empty (a pair with no links: every word unaligned).

Everything is checked before anything sized by the file is built: the file's size, the number of
pairs, words per side, links per pair, and every index against its side's length.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

SEPARATOR = " ||| "
MAX_BYTES = 32 * 1024 * 1024     # a gold file larger than this is refused before it is read
MAX_PAIRS = 20_000
MAX_WORDS = 400                  # words per side of one pair
# Indices are ASCII digits: \d and int() also take Arabic-Indic, Devanagari, full-width... digits, which
# would let a link that reads as something else name a word.
_LINK = re.compile(r"^([0-9]{1,4})([-?])([0-9]{1,4})$")
_ANY_DIGITS_LINK = re.compile(r"^(\d+)[-?](\d+)$")
BOM = "\ufeff"

Link = tuple[int, int]           # (source word, target word), 0-based


class GoldError(ValueError):
    """A gold file that cannot be used, with the line that says why."""


@dataclass(frozen=True)
class GoldPair:
    src: list[str]
    tgt: list[str]
    sure: frozenset[Link]
    possible: frozenset[Link] = field(default=frozenset())   # P, sure links included

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            object.__setattr__(self, "possible", frozenset(self.possible | self.sure))

    @property
    def src_text(self) -> str:
        return " ".join(self.src)

    @property
    def tgt_text(self) -> str:
        return " ".join(self.tgt)

    def line(self) -> str:
        """The pair as one line of a gold file."""
        links = [f"{i}-{j}" for i, j in sorted(self.sure)]
        links += [f"{i}?{j}" for i, j in sorted(self.possible - self.sure)]
        return SEPARATOR.join([self.src_text, self.tgt_text, " ".join(sorted(links, key=_link_order))])


def _link_order(text: str) -> tuple[int, int]:
    i, _, j = _LINK.match(text).groups()
    return int(i), int(j)


def parse_links(text: str, n_src: int, n_tgt: int, where: str = "") -> tuple[frozenset[Link], frozenset[Link]]:
    """(sure, possible) from Pharaoh text; possible includes sure. Raises GoldError on a malformed
    link or an index outside the sentence."""
    sure, possible = set(), set()
    items = text.split()
    if len(items) > n_src * n_tgt:
        raise GoldError(f"{where}{len(items)} links for {n_src} x {n_tgt} words")
    for item in items:
        m = _LINK.match(item)
        if not m:
            if _ANY_DIGITS_LINK.match(item) and not item.isascii():
                raise GoldError(f"{where}link {item[:20]!r}: word indices are written with the digits 0-9 only")
            raise GoldError(f"{where}link {item[:20]!r} is not 'i-j' (sure) or 'i?j' (possible)")
        i, kind, j = int(m.group(1)), m.group(2), int(m.group(3))
        if i >= n_src or j >= n_tgt:
            raise GoldError(f"{where}link {item} is outside the sentence ({n_src} source, {n_tgt} target words)")
        possible.add((i, j))
        if kind == "-":
            sure.add((i, j))
    return frozenset(sure), frozenset(possible)


def parse_line(line: str, where: str = "") -> GoldPair:
    parts = line.rstrip("\n").split("|||")
    if len(parts) != 3:
        raise GoldError(f"{where}expected 'source ||| target ||| links', found {len(parts)} field(s)")
    src, tgt = parts[0].split(), parts[1].split()
    if not src or not tgt:
        raise GoldError(f"{where}a side has no words")
    if len(src) > MAX_WORDS or len(tgt) > MAX_WORDS:
        raise GoldError(f"{where}more than {MAX_WORDS} words on a side")
    sure, possible = parse_links(parts[2], len(src), len(tgt), where)
    return GoldPair(src=src, tgt=tgt, sure=sure, possible=possible)


def parse_gold(text: str, name: str = "gold") -> list[GoldPair]:
    """All pairs of a gold file's text (GoldError names the line of the first problem). A leading byte
    order mark, as Windows editors save UTF-8, is not part of line 1. Lines end at a newline alone (CRLF's
    carriage return is whitespace): str.splitlines would also end one at a form feed or U+2028 inside a
    word, and the line numbers would no longer be an editor's."""
    pairs = []
    for number, line in enumerate(text.removeprefix(BOM).split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if len(pairs) >= MAX_PAIRS:
            raise GoldError(f"{name}: more than {MAX_PAIRS} pairs")
        pairs.append(parse_line(line, f"{name} line {number}: "))
    if not pairs:
        raise GoldError(f"{name}: no sentence pairs")
    return pairs


def read_gold(path: str | os.PathLike) -> list[GoldPair]:
    """A gold file from disk; its size is checked before it is read."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise GoldError(f"{path.name}: {size:,} bytes, more than the {MAX_BYTES:,} a gold file may have")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise GoldError(f"{path.name}: not UTF-8 text") from None
    except OSError as err:
        raise GoldError(f"{path.name}: cannot be read ({err.strerror or err})") from None
    return parse_gold(text, path.name)


def format_gold(pairs: Iterable[GoldPair], header: Iterable[str] = ()) -> str:
    """A gold file's text: `# ` comment lines, then one line per pair."""
    lines = [f"# {h}" if h else "#" for h in header]
    return "\n".join(lines + [p.line() for p in pairs]) + "\n"
