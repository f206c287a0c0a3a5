"""Users' own parallel data: TSV, Moses-style file pairs, Hugging Face datasets.

Formats:
* TSV: one pair per line, `source<TAB>target`, UTF-8. No header is needed; a first line that is
  exactly `src<TAB>tgt`, `source<TAB>target`, two language codes (`es<TAB>en`, as many corpora
  start: two different codes of 2-3 lowercase ASCII letters; they label the corpus and its models,
  which are `src -> tgt` otherwise) or `ref<TAB>src<TAB>tgt` (our own cache format) is read as a
  header. Three columns are accepted only under that `ref` header.
* Moses: two plain-text UTF-8 files; line i of one translates line i of the other.
* `hf:<name>`: a Hugging Face dataset with a `translation` column of {lang: text} dicts (e.g.
  `hf:Helsinki-NLP/opus_books:en-es`, config after the colon), read with the `datasets` library.

Bad data raises DataError naming the file and the 1-based line: wrong column count, bytes that are
not UTF-8, an empty file, a line with an empty side or one longer than a sentence (MAX_SIDE_CHARS), Moses
files of different lengths. Blank lines are the one thing skipped (trailing newlines are common), and only
if the rest is well formed.
Files and uploads are read a block of lines at a time (_blocks), so checking one holds a few hundred
kilobytes of it, however large it is, never the whole text split into a list of lines.
"""
from __future__ import annotations

import io
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from explorer.data.types import DataError, Pair
from explorer.files.user_files import UserFileError, open_regular

_HEADERS = {("src", "tgt"), ("source", "target")}
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")       # ISO 639-1 ("es") or 639-2/3 ("spa") style
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
MIN_PAIRS = 3              # what training needs: a pair each for train, dev and test (data.splits.split_held_out)
_BLOCK = 1 << 18          # bytes decoded and split at a time (_blocks)
SAMPLE_PAIRS = 3           # the first pairs validate_tsv keeps, for the app to show
# The most characters one side of a pair may have: ten times a long sentence of a parliament's proceedings.
# A longer "sentence" is a file whose line breaks were lost, and scoring it (sacrebleu's n-grams of a
# 14-million-character reference) took minutes and gigabytes, for a line the model reads 256 pieces of.
MAX_SIDE_CHARS = 20_000


def _blocks(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """What `read(n)` returns, regrouped into blocks of about _BLOCK bytes that end at a line break (the last
    one at the end of the data): decoded and split a block at a time, a file is never held whole, nor a list
    of all its lines. A line longer than a block is gathered in pieces (joined once: never quadratic)."""
    pieces: list[bytes] = []
    while chunk := read(_BLOCK):
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            pieces.append(chunk)
            continue
        yield b"".join(pieces + [chunk[:cut]])
        pieces = [chunk[cut:]] if cut < len(chunk) else []
    if pieces:
        yield b"".join(pieces)


def _bytes_blocks(data: bytes) -> Iterator[bytes]:
    return _blocks(io.BytesIO(data).read)          # BytesIO shares `data` until written: no copy


def _file_blocks(path: str, max_bytes: int | None = None) -> Iterator[bytes]:
    """A regular file's blocks (explorer.files.user_files.open_regular's checks first: never /dev/zero or a
    FIFO), read as they are used, at most `max_bytes` in all (DEFAULT_MAX_BYTES when not given)."""
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    try:
        fd = open_regular(path)
    except UserFileError as e:
        raise DataError(str(e)) from None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise DataError(f"{path}: {size:,} bytes, more than the {limit:,} allowed")
        total = 0

        def read(n: int) -> bytes:
            nonlocal total
            chunk = os.read(fd, min(n, limit + 1 - total))
            total += len(chunk)
            if total > limit:                       # grown while read, or a stat that lies
                raise DataError(f"{path}: more than the {limit:,} bytes allowed")
            return chunk

        yield from _blocks(read)
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _text_lines(blocks: Iterable[bytes], name: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of UTF-8 lines, one at a time; a line ends at \\n, \\r\\n or a lone \\r.
    DataError with the line number of the first bad byte, or when nothing but blank lines is there."""
    no, seen = 0, False
    for block in blocks:
        try:
            text = block.decode("utf-8-sig" if no == 0 else "utf-8")    # a byte-order mark only at the start
        except UnicodeDecodeError as e:
            before = block[:e.start]
            line = no + before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
            raise DataError(f"{name}, line {line}: not valid UTF-8 (byte 0x{block[e.start]:02x}); "
                            "save the file as UTF-8") from None
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        for line in (text[:-1] if text.endswith("\n") else text).split("\n"):
            no += 1
            seen = seen or bool(line.strip())
            yield no, line
    if not seen:
        raise DataError(f"{name}: the file is empty")


def is_header(columns: list[str]) -> bool:
    """Whether a TSV's first line names its columns rather than holding a pair: `src/tgt`, `source/target`
    (any case), or two different language codes as written (`es<TAB>en`)."""
    cells = [c.strip() for c in columns]
    if tuple(c.lower() for c in cells) in _HEADERS:
        return True
    return (len(cells) == 2 and cells[0] != cells[1]
            and all(_LANGUAGE_CODE.fullmatch(c) for c in cells))


def _tsv_pairs(lines: Iterator[tuple[int, str]], name: str, header: list[str] | None = None) -> Iterator[Pair]:
    """Pairs from numbered TSV lines, one at a time (see the module docstring); ref of each pair is
    "name:line". A first line read as a header has its cells put in `header`, when given: the app says so
    (a real pair of two short lowercase words, `oui<TAB>yes`, reads as two language codes)."""
    first_no, first_line = next(lines, (0, ""))
    first = first_line.strip().split("\t")
    has_ref = [c.lower() for c in first] == ["ref", "src", "tgt"]
    want = 3 if has_ref else 2
    if has_ref or is_header(first):
        if header is not None:
            header.extend(c.strip() for c in first)
        numbered: Iterable[tuple[int, str]] = lines
    else:
        numbered = itertools.chain([(first_no, first_line)], lines)
    found, base = False, os.path.basename(name)
    for no, line in numbered:
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != want:
            raise DataError(f"{name}, line {no}: expected {want} tab-separated columns, found "
                            f"{len(cols)}: {line[:80]!r}")
        ref, src, tgt = cols if has_ref else (f"{base}:{no}", *cols)
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            side = "source" if not src else "target"
            raise DataError(f"{name}, line {no}: the {side} side is empty")
        _check_length(name, no, src, tgt)
        found = True
        yield Pair(src, tgt, ref)
    if not found:
        raise DataError(f"{name}: no sentence pairs found")


def _check_length(name: str, no: int, src: str, tgt: str) -> None:
    """DataError when a side of line `no` is longer than MAX_SIDE_CHARS: not a sentence."""
    for side, text in (("source", src), ("target", tgt)):
        if len(text) > MAX_SIDE_CHARS:
            raise DataError(f"{name}, line {no}: the {side} side is {len(text):,} characters long, more than "
                            f"the {MAX_SIDE_CHARS:,} one sentence may have; are line breaks missing?")


def parse_tsv(data: bytes, name: str = "<upload>") -> list[Pair]:
    """Pairs from TSV bytes (see the module docstring); ref of each pair is "name:line"."""
    return list(_tsv_pairs(_text_lines(_bytes_blocks(data), name), name))


def read_tsv(path: str, max_bytes: int | None = None, header: list[str] | None = None) -> list[Pair]:
    """Pairs of a TSV file (see the module docstring); a first line read as a header has its cells put in
    `header`, when given (header_languages reads the languages it names)."""
    return list(_tsv_pairs(_text_lines(_file_blocks(path, max_bytes), path), path, header))


def header_languages(header: list[str]) -> tuple[str, str] | None:
    """The (source, target) languages a TSV's header names (`es<TAB>en`), or None for a header of column
    names (`src<TAB>tgt`) or none: the corpus, and the models trained on it, are labelled with them."""
    cells = [c.strip() for c in header]
    if len(cells) == 2 and is_header(cells) and tuple(c.lower() for c in cells) not in _HEADERS:
        return cells[0], cells[1]
    return None


def read_moses(src_path: str, tgt_path: str, max_bytes: int | None = None) -> list[Pair]:
    """Pairs from two line-aligned files; blank lines must be blank on both sides."""
    src_lines = [text for _, text in _text_lines(_file_blocks(src_path, max_bytes), src_path)]
    tgt_lines = [text for _, text in _text_lines(_file_blocks(tgt_path, max_bytes), tgt_path)]
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
        _check_length(src_path if len(s) > MAX_SIDE_CHARS else tgt_path, no, s, t)
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
    header: list[str] = field(default_factory=list)     # line 1's cells when it was read as a header, not a pair


def validate_tsv(source: bytes | str, max_bytes: int = DEFAULT_MAX_BYTES, name: str | None = None, *,
                 min_pairs: int = 1) -> TsvReport:
    """Check an uploaded TSV (bytes) or a path; raises DataError at the first bad line, or when it holds
    fewer than `min_pairs` pairs (what a training job checks: MIN_PAIRS, with split_held_out's reason).

    Streamed: each line is checked and counted as it is read, and only the first SAMPLE_PAIRS pairs are
    kept, so the memory it takes does not grow with the file (a 50 MB upload of short lines made 13
    million Pair objects, 3 GB, only to be counted)."""
    if isinstance(source, (bytes, bytearray)):
        name = name or "<upload>"
        if len(source) > max_bytes:
            raise DataError(f"{name}: {len(source):,} bytes is over the {max_bytes:,}-byte limit")
        raw = _bytes_blocks(bytes(source))
    else:
        name = name or source
        raw = _file_blocks(source, max_bytes)
    size = [0]

    def counted(blocks: Iterator[bytes]) -> Iterator[bytes]:
        for block in blocks:
            size[0] += len(block)
            yield block

    count, sample, header = 0, [], []
    for pair in _tsv_pairs(_text_lines(counted(raw), name), name, header):
        count += 1
        if len(sample) < SAMPLE_PAIRS:
            sample.append(pair)
    if count < min_pairs:
        raise DataError(f"{name}: need at least {min_pairs} sentence pairs to make train/dev/test splits, "
                        f"got {count}")
    return TsvReport(name, count, size[0], sample, header)
