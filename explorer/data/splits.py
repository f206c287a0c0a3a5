"""`load_corpus(spec)`: one entry point for every corpus, with an on-disk cache.

spec is "bible", "numbers", a .tsv path, "src_path,tgt_path" (Moses-style) or "hf:<dataset>".
A built corpus is written to `data_dir/<name>/{train,dev,test}.tsv` (columns ref, src, tgt, with a
header) plus meta.json, so the second load (the trainer, the app, tests) is instant and every
consumer sees the same split. The cache key includes the builder's version, so changing a
cleaner or a split rule rebuilds instead of silently reusing stale data.
"""
from __future__ import annotations

import hashlib
import json
import os
import random

from explorer.files.settings import folder_problem
from explorer.data.bible import build_bible, split_by_chapter
from explorer.data.files import DEFAULT_MAX_BYTES, MIN_PAIRS, header_languages, read_hf, read_moses, read_tsv
from explorer.data.numbers import build_numbers
from explorer.data.types import DataError, Pair, ParallelCorpus
from explorer.files import limits
from explorer.files.atomic import replacing
from explorer.files.user_files import read_user_file, read_user_json
from explorer.files.names import DATA_META
from explorer.files.places import REPO_ROOT

CACHE_VERSION = 3          # 3: a TSV's language-code header names the corpus's languages
_SPLITS = ("train", "dev", "test")
DEFAULT_SEED = 1234        # the split every command and the trainer read; `data --seed N` builds another


def cache_folder(name: str, seed: int = DEFAULT_SEED) -> str:
    """The cache folder's name for corpus `name` split with `seed`: the default split under the corpus's own
    name, any other beside it. One folder held every seed's split, written file by file: a `data --seed 7`
    beside a trainer's load mixed one seed's train.tsv with the other's test.tsv (test pairs in training)."""
    return name if seed == DEFAULT_SEED else f"{name}-seed{seed}"


def split_held_out(pairs: list[Pair], seed: int = 1234, dev_size: int | None = None,
                   test_size: int | None = None) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Deterministic random dev/test split of a user's file.

    Defaults: 5% each, at most 1,000 and at least 1 (a 3-line file gives 1/1/1); files with fewer
    than MIN_PAIRS (3) pairs cannot be split and raise DataError.
    """
    n = len(pairs)
    if n < MIN_PAIRS:
        raise DataError(f"need at least {MIN_PAIRS} sentence pairs to make train/dev/test splits, got {n}")
    default = max(1, min(1000, n // 20))
    dev_size = default if dev_size is None else dev_size
    test_size = default if test_size is None else test_size
    if dev_size + test_size >= n:
        dev_size = test_size = max(1, (n - 1) // 3)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    dev_idx = set(order[:dev_size])
    test_idx = set(order[dev_size:dev_size + test_size])
    train = [p for i, p in enumerate(pairs) if i not in dev_idx and i not in test_idx]
    dev = [pairs[i] for i in sorted(dev_idx)]
    test = [pairs[i] for i in sorted(test_idx)]
    return train, dev, test


def _write_tsv(path: str, pairs: list[Pair]) -> None:
    with replacing(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("ref\tsrc\ttgt\n")
        for p in pairs:
            if any(c in s for s in p for c in "\t\n\r"):
                raise DataError(f"pair {p.ref!r} contains a tab or newline; cannot cache it")
            f.write(f"{p.ref}\t{p.src}\t{p.tgt}\n")


def _read_tsv(path: str) -> list[Pair]:
    lines = read_user_file(path, DEFAULT_MAX_BYTES).decode("utf-8").split("\n")
    return [Pair(src, tgt, ref) for ref, src, tgt in
            (ln.split("\t") for ln in lines[1:] if ln)]


def save_cached(corpus: ParallelCorpus, directory: str, extra: dict | None = None) -> None:
    os.makedirs(directory, exist_ok=True)
    for split in _SPLITS:
        _write_tsv(os.path.join(directory, f"{split}.tsv"), getattr(corpus, split))
    meta = {"name": corpus.name, "src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang,
            "version": CACHE_VERSION, "sizes": corpus.sizes(), **(extra or {})}
    with replacing(os.path.join(directory, DATA_META), "w", encoding="utf-8") as f:   # last: it marks the cache whole
        json.dump(meta, f, indent=1, ensure_ascii=False)


def load_cached(directory: str, key: str) -> ParallelCorpus | None:
    """The cached corpus if present and built with the same key; otherwise None."""
    try:
        meta = read_user_json(os.path.join(directory, DATA_META), limits.JSON_BYTES)
        if not isinstance(meta, dict):
            return None
        if meta.get("version") != CACHE_VERSION or meta.get("key") != key:
            return None
        parts = {s: _read_tsv(os.path.join(directory, f"{s}.tsv")) for s in _SPLITS}
    except (OSError, ValueError, RecursionError):    # UserFileError and UnicodeDecodeError are ValueErrors
        return None
    return ParallelCorpus(meta["name"], meta["src_lang"], meta["tgt_lang"], **parts)


def _file_key(*paths: str) -> str:
    """Content hash of user files, so editing a file invalidates its cache."""
    h = hashlib.sha1()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def _user_files(spec: str) -> tuple[str, list[str]] | None:
    """A spec naming the user's own files: (kind, their paths); None for a built-in or hub corpus."""
    if spec in ("bible", "numbers") or spec.startswith("hf:"):
        return None
    if "," in spec and not os.path.lexists(spec):
        paths = [s.strip() for s in spec.split(",", 1)]
        if not all(paths):                    # "a.tsv," named a second file with no name
            raise DataError(f"{spec!r}: 'src.txt,tgt.txt' names two files, and one of these names is empty")
        return "moses", paths
    if os.path.lexists(spec):                 # a dangling link or a loop too: the reader says what it is
        return "tsv", [spec]
    raise DataError(f"unknown corpus {spec!r}: use 'bible', 'numbers', a .tsv file, "
                    "'src.txt,tgt.txt' or 'hf:<dataset>'")


def _user_name(kind: str, paths: list[str], key: str) -> str:
    return f"{kind}-{os.path.splitext(os.path.basename(paths[0]))[0]}-{key[:8]}"


def corpus_name(spec: str) -> str:
    """The name the corpus `spec` is built under, without building it: a built-in's own name, or for the
    user's files their name with their content's key, so an edited file names another corpus (a
    checkpoint records the name it was trained on, and what reads its training pairs later compares)."""
    files = _user_files(spec)
    if files is None:
        return "hf-" + spec[3:].replace("/", "-").replace(":", "-") if spec.startswith("hf:") else spec
    kind, paths = files
    return _user_name(kind, paths, _file_key(*paths))


def _build(spec: str, seed: int) -> tuple[ParallelCorpus, str, str]:
    """Build the corpus for `spec`: (corpus, cache name, cache key)."""
    if spec == "bible":
        pairs, _report = build_bible()
        train, dev, test = split_by_chapter(pairs, seed=seed)
        return ParallelCorpus("bible", "es", "en", train, dev, test), "bible", f"bible-{seed}"
    if spec == "numbers":
        return build_numbers(seed=seed), "numbers", f"numbers-{seed}"
    if spec.startswith("hf:"):
        pairs, src_lang, tgt_lang = read_hf(spec[3:])
        name = corpus_name(spec)
        return ParallelCorpus(name, src_lang, tgt_lang, *split_held_out(pairs, seed)), name, f"{spec}-{seed}"
    kind, paths = _user_files(spec)
    header: list[str] = []
    pairs = read_moses(*paths) if kind == "moses" else read_tsv(paths[0], header=header)
    src_lang, tgt_lang = header_languages(header) or ("src", "tgt")       # a header `es<TAB>en` names them
    key = _file_key(*paths)
    name = _user_name(kind, paths, key)
    return ParallelCorpus(name, src_lang, tgt_lang, *split_held_out(pairs, seed)), name, f"{key}-{seed}"


DATA_ENV = "EXPLORER_DATA_DIR"


def default_data_dir() -> str:
    """Where built corpora are cached: $EXPLORER_DATA_DIR, else data/ in the repository (not the cwd),
    so the trainer, the app and the evaluate command find the same cache wherever they start."""
    return os.environ.get(DATA_ENV) or str(REPO_ROOT / "data")


def data_folder(data_dir: str | None = None) -> str:
    """The cache folder a load uses: `data_dir` (a command's --data-dir) or default_data_dir(); DataError
    naming where it came from when that is not a folder (a regular file, /dev/null: the cache's first
    write would be a NotADirectoryError traceback; explorer.files.settings.folder_problem)."""
    folder = data_dir or default_data_dir()
    problem = folder_problem(folder)
    if problem:
        named = f"the data folder {folder}" if data_dir else (
            f"${DATA_ENV}={folder}" if os.environ.get(DATA_ENV) else f"the data folder {folder}")
        raise DataError(f"{named}: {problem}; name a folder to cache corpora in")
    return folder


def load_corpus(spec: str, data_dir: str | None = None, seed: int = DEFAULT_SEED,
                use_cache: bool = True) -> ParallelCorpus:
    """The corpus named by `spec`, from `data_dir/<name>/` (default_data_dir()) when cached there,
    else built and cached.

    Raises DataError (BibleNotInstalled for missing SWORD modules) with a user-readable message.
    """
    data_dir = data_folder(data_dir)
    builtin = {"bible": f"bible-{seed}", "numbers": f"numbers-{seed}"}
    if use_cache and spec in builtin:
        cached = load_cached(os.path.join(data_dir, cache_folder(spec, seed)), builtin[spec])
        if cached is not None:
            return cached
    corpus, name, key = _build(spec, seed)
    if use_cache:
        directory = os.path.join(data_dir, cache_folder(name, seed))
        cached = load_cached(directory, key) if spec not in builtin else None
        if cached is not None:
            return cached
        save_cached(corpus, directory, {"key": key, "spec": spec})
    return corpus
