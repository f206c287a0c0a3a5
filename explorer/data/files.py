"""Users' own parallel data: TSV, Moses-style file pairs, Hugging Face datasets.

Formats:
* TSV: one pair per line, `source<TAB>target`, UTF-8. No header is needed; a first line that is
  exactly `src<TAB>tgt`, `source<TAB>target`, two language codes (`es<TAB>en`, as many corpora
  start: two different codes of 2-3 lowercase ASCII letters) or `ref<TAB>src<TAB>tgt` (our own
  cache format) is read as a header. Three columns are accepted only under that `ref` header.
* Moses: two plain-text UTF-8 files; line i of one translates line i of the other.
* `hf:<name>`: a Hugging Face dataset with a `translation` column of {lang: text} dicts (e.g.
  `hf:Helsinki-NLP/opus_books:en-es`, config after the colon), read with the `datasets` library.

Bad data raises DataError naming the file and the 1-based line: wrong column count, bytes that are
not UTF-8, an empty file, a line with an empty side, Moses files of different lengths. Blank lines
are the one thing skipped (trailing newlines are common), and only if the rest is well formed.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from explorer.data.types import DataError, Pair
from explorer.files.user_files import UserFileError, read_user_file

_HEADERS = {("src", "tgt"), ("source", "target")}
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")       # ISO 639-1 ("es") or 639-2/3 ("spa") style
DEFAULT_MAX_BYTES = 200 * 1024 * 1024


def _decode_lines(data: bytes, name: str) -> list[str]:
    """UTF-8 text split into lines; DataError with the line number of the first bad byte."""
    if not data.strip():
        raise DataError(f"{name}: the file is empty")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"{name}, line {line}: not valid UTF-8 (byte 0x{data[e.start]:02x}); "
                        "save the file as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """A regular file's bytes, at most `max_bytes` (DEFAULT_MAX_BYTES when not given): a path may name
    /dev/zero (endless, with a size of 0) or a FIFO (an open that waits forever); explorer.files.user_files
    refuses both before reading."""
    try:
        return read_user_file(path, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
    except UserFileError as e:
        raise DataError(str(e)) from None


def is_header(columns: list[str]) -> bool:
    """Whether a TSV's first line names its columns rather than holding a pair: `src/tgt`, `source/target`
    (any case), or two different language codes as written (`es<TAB>en`)."""
    cells = [c.strip() for c in columns]
    if tuple(c.lower() for c in cells) in _HEADERS:
        return True
    return (len(cells) == 2 and cells[0] != cells[1]
            and all(_LANGUAGE_CODE.fullmatch(c) for c in cells))


def parse_tsv(data: bytes, name: str = "<upload>") -> list[Pair]:
    """Pairs from TSV bytes (see the module docstring); ref of each pair is "name:line"."""
    lines = _decode_lines(data, name)
    first = lines[0].strip().split("\t") if lines else []
    has_ref = [c.lower() for c in first] == ["ref", "src", "tgt"]
    start = 1 if has_ref or is_header(first) else 0
    want = 3 if has_ref else 2
    pairs: list[Pair] = []
    for no, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != want:
            raise DataError(f"{name}, line {no}: expected {want} tab-separated columns, found "
                            f"{len(cols)}: {line[:80]!r}")
        ref, src, tgt = cols if has_ref else (f"{os.path.basename(name)}:{no}", *cols)
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            side = "source" if not src else "target"
            raise DataError(f"{name}, line {no}: the {side} side is empty")
        pairs.append(Pair(src, tgt, ref))
    if not pairs:
        raise DataError(f"{name}: no sentence pairs found")
    return pairs


def read_tsv(path: str, max_bytes: int | None = None) -> list[Pair]:
    return parse_tsv(_read_bytes(path, max_bytes), path)


def read_moses(src_path: str, tgt_path: str, max_bytes: int | None = None) -> list[Pair]:
    """Pairs from two line-aligned files; blank lines must be blank on both sides."""
    src_lines = _decode_lines(_read_bytes(src_path, max_bytes), src_path)
    tgt_lines = _decode_lines(_read_bytes(tgt_path, max_bytes), tgt_path)
    for lines in (src_lines, tgt_lines):          # a final newline is not an extra line
        while lines and not lines[-1].strip():
            lines.pop()
    if len(src_lines) != len(tgt_lines):
        raise DataError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has "
                        f"{len(tgt_lines)}; line i of one must translate line i of the other")
    pairs: list[Pair] = []
    for no, (s, t) in enumerate(zip(src_lines, tgt_lines), start=1):
        s, t = s.strip(), t.strip()
        if not s and not t:
            continue
        if not s or not t:
            path = src_path if not s else tgt_path
            raise DataError(f"{path}, line {no}: empty line (the other file has text there)")
        if "\t" in s or "\t" in t:
            path = src_path if "\t" in s else tgt_path
            raise DataError(f"{path}, line {no}: contains a tab")
        pairs.append(Pair(s, t, f"{os.path.basename(src_path)}:{no}"))
    if not pairs:
        raise DataError(f"{src_path}: no sentence pairs found")
    return pairs


def read_hf(name: str, split: str = "train", limit: int | None = None) -> tuple[list[Pair], str, str]:
    """A Hugging Face translation dataset: "Helsinki-NLP/opus_books:en-es" = dataset, config.

    Returns (pairs, src_lang, tgt_lang); the config's "a-b" order gives source a, target b.
    Needs the `datasets` package and a network connection (or a warm local cache).
    """
    try:
        import datasets  # noqa: F401  (optional dependency, imported only here)
    except ImportError:
        raise DataError("hf: datasets need the 'datasets' package: pip install datasets") from None
    path, _, config = name.partition(":")
    try:
        ds = datasets.load_dataset(path, config or None, split=split)
    except Exception as e:                  # offline, unknown name, missing config...
        raise DataError(f"hf:{name}: could not load the dataset ({type(e).__name__}: {e})") from None
    if "translation" not in ds.column_names:
        raise DataError(f"hf:{name}: no 'translation' column (columns: {ds.column_names})")
    langs = config.split("-") if config.count("-") == 1 else None
    pairs: list[Pair] = []
    for i, row in enumerate(ds["translation"]):
        if limit is not None and i >= limit:
            break
        src_lang, tgt_lang = langs or list(row)[:2]
        src, tgt = (row.get(src_lang) or "").strip(), (row.get(tgt_lang) or "").strip()
        if src and tgt:
            pairs.append(Pair(" ".join(src.split()), " ".join(tgt.split()), f"hf:{name}:{i}"))
    if not pairs:
        raise DataError(f"hf:{name}: no non-empty translation pairs")
    langs = langs or list(ds[0]["translation"])[:2]
    return pairs, langs[0], langs[1]


@dataclass
class TsvReport:
    """What validate_tsv found: enough for the app to show before launching a training job."""

    name: str
    pairs: int
    bytes: int
    sample: list[Pair]


def validate_tsv(source: bytes | str, max_bytes: int = DEFAULT_MAX_BYTES,
                 name: str | None = None) -> TsvReport:
    """Check an uploaded TSV (bytes) or a path; raises DataError at the first bad line."""
    if isinstance(source, (bytes, bytearray)):
        data, name = bytes(source), name or "<upload>"
        if len(data) > max_bytes:
            raise DataError(f"{name}: {len(data):,} bytes is over the {max_bytes:,}-byte limit")
    else:
        data, name = _read_bytes(source, max_bytes), name or source
    pairs = parse_tsv(data, name)
    return TsvReport(name, len(pairs), len(data), pairs[:3])
