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

    def seen_in_training(self) -> dict[str, int]:
        """How many dev and test pairs are also training pairs, word for word (source and target): a file
        with repeated lines splits them across the sets, and the scores on those pairs measure memory."""
        trained = {(p.src, p.tgt) for p in self.train}
        return {split: sum((p.src, p.tgt) in trained for p in getattr(self, split)) for split in ("dev", "test")}

    def overlap_warning(self) -> str | None:
        """One line, "note: ..." or (when 5% or more of a held-out set) "warning: ...", saying how many
        held-out pairs training already holds (seen_in_training); None when none. The Bible's repeated
        formulas ("Yahweh spoke to Moses, saying,") make a note; a file of repeated lines a warning."""
        seen = self.seen_in_training()
        shares = {split: n / len(getattr(self, split)) for split, n in seen.items() if n}
        if not shares:
            return None
        parts = [f"{seen[split]:,} of the {len(getattr(self, split)):,} {split} pairs ({share:.1%})"
                 for split, share in shares.items()]
        level = "warning" if max(shares.values()) >= 0.05 else "note"
        return (f"{level}: {' and '.join(parts)} are also training pairs, word for word (the corpus repeats "
                "them): scores on them measure what the model memorised")
