"""Minimal pairs of English number words for activation patching: one unit word changed, anywhere.

A number such as "three hundred and twenty one" becomes "three hundred and twenty two": the LAST unit
word (one ... nine) is replaced by the next (nine wraps to one). Changing the last one, not the first,
puts the changed word in the middle or at the end of most numbers, so the measured output token is
mid-sentence too (German says "drei hundert ein und zwanzig": the changed "one" is written after the
hundreds), and the patching grids show where a word travels when it is not the sentence's first. A
unit word is one piece in a number vocabulary and so is its swap, so the pieces line up position by
position as patching needs (explorer.studies.patching.pair checks that, and refuses pairs whose translations
agree).

    python -m explorer.studies.patching.number_pairs checkpoints/numbers-en-de/test.tsv --pairs 100 --out number-pairs.tsv

writes clean<TAB>corrupt lines (the first N sources of the file that hold a unit word) for
`python -m explorer patch CHECKPOINT --pairs number-pairs.tsv`.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Iterable

from explorer.evaluation.arguments import count

UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
MAX_PAIRS = 1000                # as many as `python -m explorer patch --pairs` reads


@dataclass(frozen=True)
class NumberPair:
    clean: str
    corrupt: str
    word: int                   # which word changed (0-based, whitespace-separated)


def number_pair(text: str) -> NumberPair | None:
    """The pair of one number text: its last unit word replaced by the next; None without a unit word."""
    words = text.split()
    where = [i for i, w in enumerate(words) if w in UNITS]
    if not where:
        return None
    i = where[-1]
    swapped = UNITS[(UNITS.index(words[i]) + 1) % len(UNITS)]
    return NumberPair(" ".join(words), " ".join(words[:i] + [swapped] + words[i + 1:]), i)


def number_pairs(texts: Iterable[str], n: int) -> list[NumberPair]:
    """The pairs of the first `n` texts that hold a unit word, in order."""
    if not 1 <= n <= MAX_PAIRS:
        raise ValueError(f"pairs >= 1 and <= {MAX_PAIRS} required, not {n}")
    out = []
    for text in texts:
        pair = number_pair(text)
        if pair is not None:
            out.append(pair)
            if len(out) == n:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.studies.patching.number_pairs",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("tsv", help="a TSV of number pairs (its source side is read), e.g. a checkpoint's test.tsv")
    parser.add_argument("--pairs", type=count("pairs", 1, MAX_PAIRS), default=100,
                        help=f"how many pairs (default 100, at most {MAX_PAIRS:,})")
    parser.add_argument("--out", required=True, help="the clean<TAB>corrupt file to write")

    from explorer.data.files import read_tsv
    from explorer.files.atomic import write_bytes_atomic
    from explorer.studies.common.command import parse_checked

    args = parse_checked(parser, argv)           # --out: not the TSV it reads, nothing in a model or the shipped folder
    if args is None:
        return 2
    try:
        pairs = number_pairs((p.src for p in read_tsv(args.tsv)), args.pairs)
    except ValueError as err:                    # DataError is one too
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not pairs:
        print(f"error: {args.tsv}: no source holds a unit word (one ... nine)", file=sys.stderr)
        return 2
    write_bytes_atomic(args.out, "".join(f"{p.clean}\t{p.corrupt}\n" for p in pairs).encode("utf-8"))
    inner = sum(p.word > 0 for p in pairs)
    print(f"{len(pairs)} pairs written to {args.out}; {inner} change a word that is not the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
