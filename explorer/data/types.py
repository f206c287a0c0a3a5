"""The plain records every corpus is made of, and the one error type bad data raises."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class DataError(ValueError):
    """Bad or unavailable data. The message is meant for the user: it names the file and line."""


class Pair(NamedTuple):
    """One aligned sentence pair; `ref` says where it came from ("Gen.1.1", "n=21", "data.tsv:7")."""

    src: str
    tgt: str
    ref: str = ""


@dataclass
class ParallelCorpus:
    """A named corpus split into train / dev / test lists of `Pair`."""

    name: str
    src_lang: str
    tgt_lang: str
    train: list[Pair] = field(default_factory=list)
    dev: list[Pair] = field(default_factory=list)
    test: list[Pair] = field(default_factory=list)

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}
