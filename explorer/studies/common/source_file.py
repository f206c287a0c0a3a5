"""A file of sentences a study runs on, read once for every command that takes one: one source sentence
per line, or a TSV whose header names a `source` (or `src`) column and, optionally, a `target` (or `tgt`)
column of references. Read through the bounded reader (explorer.files.user_files), at most MAX_SENTENCES
sentences; a ValueError names what is wrong in one line.
"""
from __future__ import annotations

from explorer.data.files import DEFAULT_MAX_BYTES
from explorer.files.user_files import read_user_file

MAX_SENTENCES = 10_000


def read_sentences(path: str) -> tuple[list[str], list[str] | None]:
    """(sources, references or None): references only from a TSV with a target column, one per source."""
    try:
        text = read_user_file(path, DEFAULT_MAX_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    header = [c.strip().lower() for c in lines[0].split("\t")] if lines else []
    column = next((header.index(n) for n in ("source", "src") if n in header), None)
    target = next((header.index(n) for n in ("target", "tgt") if n in header), None)
    refs = None
    if column is not None:
        rows = [line.split("\t") for line in lines[1:]]
        rows = [r for r in rows if len(r) > column and r[column].strip()]
        lines = [r[column] for r in rows]
        if target is not None:
            refs = [r[target].strip() if len(r) > target else "" for r in rows]
    sources = [line.strip() for line in lines if line.strip()]
    if not sources:
        raise ValueError(f"{path}: no sentences")
    if len(sources) > MAX_SENTENCES:
        raise ValueError(f"{path}: {len(sources):,} sentences, more than the {MAX_SENTENCES:,} allowed")
    return sources, refs


def read_sources(path: str) -> list[str]:
    """The source sentences of the file (see the module docstring)."""
    return read_sentences(path)[0]
