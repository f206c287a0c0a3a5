"""A checkpoint's training data, counted: how often each word, and each pair of neighbouring words, occurs
in its training pairs, which target words each source word brings along (links.py), with the score
threshold calibrated on its held-out pairs.

Why counts and not the pairs themselves: the verdict needs only how often the training data showed a
word (never, once, thousands of times), and counts of the Bible's 29,000 training verses fit in a few
hundred KB compressed, small enough to ship beside the checkpoint, so `make run` on a machine without the
Bible packages still has them. Built from the checkpoint's own training split (explorer.data's splits, the
same seed as the trainer), never from its test pairs, so a test verse is as new to the index as to the
model.

Kept as gzip'd JSON, one per dataset (the counts and the threshold depend on the data, not on the
weights): in checkpoints/grounding/ for the shipped checkpoints' datasets, else under runs/grounding/. Read back through the bounded reader (a regular file, at most limits.INDEX_BYTES) and
decompressed to at most limits.INDEX_JSON_BYTES (a small file that inflates without end is refused),
checked field by field.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterable

from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING
from explorer.files.user_files import read_user_file
from explorer.store.run_paths import runs_root, shipped_root
from explorer.studies.grounding.links import count_links, glue
from explorer.studies.common.words import bigrams, words

FORMAT = 2                     # 2: the links and each source word's pair count (an index of format 1 is built again)
MAX_SURPRISE = 100.0           # nats per word: above any score (an unseen word in 10^9 costs about 21)


class IndexUnusable(ValueError):
    """An index file that cannot be used, with the reason in one line."""


@dataclass
class TrainingIndex:
    dataset: str                           # what the checkpoint was trained on (its config's training.dataset)
    pairs: int                             # training pairs counted
    src_lang: str | None
    tgt_lang: str | None
    src_words: dict[str, int]
    tgt_words: dict[str, int]
    src_bigrams: dict[str, int]
    links: dict[str, dict[str, int]] = field(default_factory=dict)   # s -> {t: pairs with both} (links.py)
    src_verses: dict[str, int] = field(default_factory=dict)         # s -> training pairs whose source has s
    threshold: float | None = None         # scores (nats per word) above it are guesses (verdict.calibrate)
    calibration: dict = field(default_factory=dict)    # how the threshold was chosen, on which pairs

    def to_json(self) -> dict:
        return {"format": FORMAT, **{f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}}

    def glue(self) -> set[str]:
        """The target words common enough to need no source word's support (links.GLUE_SHARE)."""
        if self._glue is None:
            self._glue = glue(self.tgt_words, self.pairs)
        return self._glue

    def bigram_model(self) -> "BigramModel":
        """The source side's bigram model (built once per index: a pass over the bigram counts)."""
        if self._model is None:
            self._model = BigramModel(self.src_words, self.src_bigrams)
        return self._model

    _model: "BigramModel | None" = field(default=None, repr=False, compare=False)
    _glue: "set[str] | None" = field(default=None, repr=False, compare=False)


class BigramModel:
    """P(word | previous word) from counts, Witten-Bell interpolated with an add-1/2 unigram model: the
    more different words follow `previous` in the data, the more weight the unigram gets."""

    def __init__(self, unigrams: dict[str, int], pairs: dict[str, int]):
        self.unigrams, self.pairs = unigrams, pairs
        self.total, self.types = sum(unigrams.values()), len(unigrams)
        self.after: dict[str, int] = {}                 # occurrences of a word with a word after it
        self.followers: dict[str, int] = {}             # how many different words follow it
        for pair, n in pairs.items():
            first = pair.split(" ", 1)[0]
            self.after[first] = self.after.get(first, 0) + n
            self.followers[first] = self.followers.get(first, 0) + 1

    def unigram(self, word: str) -> float:
        return (self.unigrams.get(word, 0) + 0.5) / (self.total + 0.5 * (self.types + 1))

    def probability(self, previous: str | None, word: str) -> float:
        seen_after = self.after.get(previous, 0) if previous is not None else 0
        if not seen_after:
            return self.unigram(word)
        weight = self.followers[previous] / (self.followers[previous] + seen_after)
        return (1 - weight) * self.pairs.get(f"{previous} {word}", 0) / seen_after + weight * self.unigram(word)


def count(pairs: Iterable, dataset: str, src_lang: str | None, tgt_lang: str | None) -> TrainingIndex:
    """Counts of the training pairs (objects with .src and .tgt): words, source word pairs, then the links
    (a second pass: which target words are glue follows from the first)."""
    pairs = list(pairs)
    src, tgt, grams = Counter(), Counter(), Counter()
    for pair in pairs:
        tokens = words(pair.src)
        src.update(tokens)
        grams.update(bigrams(tokens))
        tgt.update(words(pair.tgt))
    links, src_verses = count_links(pairs, glue(tgt, len(pairs)))
    return TrainingIndex(dataset=dataset, pairs=len(pairs), src_lang=src_lang, tgt_lang=tgt_lang,
                         src_words=dict(src), tgt_words=dict(tgt), src_bigrams=dict(grams), links=links,
                         src_verses=src_verses)


def save(index: TrainingIndex, path: Path) -> Path:
    """gzip'd JSON, written whole (explorer.files.atomic); mtime 0 so the same counts give the same bytes."""
    data = json.dumps(index.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    write_bytes_atomic(path, gzip.compress(data, compresslevel=9, mtime=0))
    return Path(path)


def _inflate(data: bytes, name: str) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)          # gzip framing
    try:
        out = inflater.decompress(data, limits.INDEX_JSON_BYTES)
    except zlib.error as exc:
        raise IndexUnusable(f"{name}: not a gzip file ({exc})") from None
    if inflater.unconsumed_tail:
        raise IndexUnusable(f"{name}: inflates to more than {limits.INDEX_JSON_BYTES:,} bytes")
    return out


def _counts(value, name: str, key: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and type(v) is int and v > 0
                                              for k, v in value.items()):
        raise IndexUnusable(f"{name}: {key} must map words to positive counts")
    return value


def _links(value, name: str) -> dict[str, dict[str, int]]:
    if not isinstance(value, dict):
        raise IndexUnusable(f"{name}: links must map source words to target words' counts")
    for s, targets in value.items():
        _counts(targets, name, f"links[{s[:40]!r}]")
    return value


def load(path: Path) -> TrainingIndex:
    """An index file, checked; IndexUnusable (one line) for anything else."""
    name = str(path)
    try:
        record = json.loads(_inflate(read_user_file(path, limits.INDEX_BYTES, inside=Path(path).parent), name))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:     # UserFileError is a ValueError
        raise IndexUnusable(str(exc) if isinstance(exc, IndexUnusable) else f"{name}: {exc}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise IndexUnusable(f"{name}: not a training-word index of format {FORMAT}")
    threshold = record.get("threshold")
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 <= threshold <= MAX_SURPRISE):
        raise IndexUnusable(f"{name}: threshold must be a number of nats in [0, {MAX_SURPRISE}]")
    pairs = record.get("pairs")
    if type(pairs) is not int or pairs < 0:
        raise IndexUnusable(f"{name}: pairs must be a count")
    return TrainingIndex(dataset=str(record.get("dataset", "")), pairs=pairs,
                         src_lang=record.get("src_lang") if isinstance(record.get("src_lang"), str) else None,
                         tgt_lang=record.get("tgt_lang") if isinstance(record.get("tgt_lang"), str) else None,
                         src_words=_counts(record.get("src_words"), name, "src_words"),
                         tgt_words=_counts(record.get("tgt_words"), name, "tgt_words"),
                         src_bigrams=_counts(record.get("src_bigrams"), name, "src_bigrams"),
                         links=_links(record.get("links"), name),
                         src_verses=_counts(record.get("src_verses"), name, "src_verses"),
                         threshold=threshold,
                         calibration=record.get("calibration") if isinstance(record.get("calibration"), dict) else {})


def shipped_path(dataset: str) -> Path:
    return shipped_root() / GROUNDING / f"{hashlib.sha256(dataset.encode()).hexdigest()[:16]}.json.gz"


def index_path(dataset: str) -> Path:
    """Where the index of a dataset is: the repository's (checkpoints/grounding/, shipped with the
    checkpoints trained on it, read only) when there is one, else runs/grounding/ (built here)."""
    shipped = shipped_path(dataset)
    return shipped if shipped.exists() else runs_root() / GROUNDING / shipped.name


def is_shipped(path: Path) -> bool:
    return Path(path).parent == shipped_root() / GROUNDING
