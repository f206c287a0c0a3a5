"""A checkpoint's training pairs, readable on any machine: what grounding counts and searches and what
the features' dictionaries are trained on and their contexts drawn from.

Where the pairs come from: checkpoints/grounding/<dataset key>.train.tsv.xz when the repository ships
them (the Bible's 28,627 training verses: 1.8 MB; both translations are in the public domain), so
`make run` has them without the Bible packages; else the checkpoint's dataset itself (the numbers are
generated, a fine-tune's TSV is on disk). The shipped file is read through the bounded reader and
decompressed to at most limits.PAIRS_BYTES, and must equal the dataset's training split (a test
rebuilds it).

Which pairs: a checkpoint trained here records the name of the corpus it was trained on
(training.corpus; a user's file's name carries its content's key), and a dataset whose file has been
edited since is refused (NoTrainingData), so nothing reads another corpus's pairs as a checkpoint's own.
"""
from __future__ import annotations

import functools
import hashlib
import lzma
import os
from pathlib import Path

from explorer.data import DataError, corpus_name, load_corpus
from explorer.data.files import parse_tsv
from explorer.data.types import Pair
from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING
from explorer.files.user_files import UserFileError, read_user_file
from explorer.store.run_paths import shipped_root


class NoTrainingData(ValueError):
    """The checkpoint names no training data that can be read here; the message says which and why."""


def dataset_of(meta: dict) -> str:
    training = meta.get("training") if isinstance(meta, dict) else None
    dataset = training.get("dataset") if isinstance(training, dict) else None
    if not isinstance(dataset, str) or not dataset.strip():
        raise NoTrainingData("this model names no training data (an imported model, or one trained elsewhere), "
                             "so there are no training pairs to read")
    recorded = training.get("corpus")
    if isinstance(recorded, str):
        now = current_corpus_name(dataset)
        if now != recorded:
            raise NoTrainingData(f"the training data of this model ({dataset}) has changed since it was trained "
                                 f"(it was {recorded}, it is now {now or 'unreadable'}), so its training pairs "
                                 "are not the ones it learned from")
    return dataset


def current_corpus_name(dataset: str) -> str | None:
    """The corpus name of `dataset` as it is on disk now (None when it cannot be read): a user's file is
    hashed once per size and modification time."""
    try:
        stat = os.stat(dataset)
        seen = (stat.st_size, stat.st_mtime_ns)
    except (OSError, ValueError):
        seen = None
    return _named(dataset, seen)


@functools.lru_cache(maxsize=64)
def _named(dataset: str, seen) -> str | None:
    try:
        return corpus_name(dataset)
    except (DataError, OSError):
        return None


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


def dataset_pairs(dataset: str) -> list[Pair]:
    """The dataset's training split: the shipped copy when there is one, else the dataset read here
    (DataError when it cannot be: the Bible without its packages and without a shipped copy)."""
    path = shipped_pairs_path(dataset)
    if path.is_file():
        return _read_shipped(path)
    return list(load_corpus(dataset).train)


def training_pairs(meta: dict) -> list:
    """The checkpoint's training split (the pairs its index counted and its gradient store holds): the
    repository's copy when it ships one, else the dataset read here."""
    dataset = dataset_of(meta)
    try:
        return dataset_pairs(dataset)
    except (DataError, PairsUnusable) as err:
        raise NoTrainingData(f"the training data of this model ({dataset}) cannot be read here: {err}") from None
