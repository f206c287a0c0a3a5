"""A file of sentences a study runs on, read once for every command that takes one: one source sentence
per line (no tabs), or a TSV whose header names a `source` (or `src`) column and, optionally, a `target` (or `tgt`)
column of references. Read through the bounded reader (explorer.files.user_files), at most MAX_SENTENCES
sentences of at most MAX_SENTENCE_CHARS characters each; a ValueError names what is wrong in one line,
with the line number where one line is at fault.

Why a sentence has a length limit: the model reads only its first max_len pieces, but the studies work on
the whole text (the grounding verdict makes an entry per word), so one 10 MB line once took 42 s and
1.7 GB and wrote a 197 MB result, with exit status 0. The limit is the one a sentence has everywhere,
written here once: the app cuts its sentence there (webapp/sentence.py) and the graph command refuses a
longer one (explorer/studies/graphs/step.py).

Why a tab in a file with no `source` header is refused: the file is then read as plain lines, so a TSV
whose header names other columns ("foo<TAB>bar") had its header and each row translated as sentences,
tabs and all. A plain file of sentences holds no tabs; a TSV says which column is the sentence.
"""
from __future__ import annotations

from explorer.data.files import DEFAULT_MAX_BYTES
from explorer.files.user_files import read_user_file

MAX_SENTENCES = 10_000
MAX_SENTENCE_CHARS = 2_000        # a source sentence or a reference: in a file, the app, the graph command


def _checked(path: str, number: int, text: str, what: str) -> str:
    """`text` stripped, or a ValueError naming the line when it is longer than MAX_SENTENCE_CHARS."""
    text = text.strip()
    if len(text) > MAX_SENTENCE_CHARS:
        raise ValueError(f"{path}: line {number:,}: a {what} of {len(text):,} characters, more than the "
                         f"{MAX_SENTENCE_CHARS:,} allowed")
    return text


def read_sentences(path: str) -> tuple[list[str], list[str] | None]:
    """(sources, references or None): references only from a TSV with a target column, one per source."""
    try:
        text = read_user_file(path, DEFAULT_MAX_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    lines = [(n, line) for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1) if line.strip()]
    del text
    header = [c.strip().lower() for c in lines[0][1].split("\t")] if lines else []
    column = next((header.index(n) for n in ("source", "src") if n in header), None)
    target = next((header.index(n) for n in ("target", "tgt") if n in header), None)
    sources, refs = [], None
    if column is None:
        for n, line in lines:
            if "\t" in line:
                raise ValueError(f"{path}: line {n:,} holds a tab, but line {lines[0][0]:,}, the first, names no "
                                 f"'source' (or 'src') column: a TSV needs that header; or give one sentence per "
                                 f"line without tabs")
            sources.append(_checked(path, n, line, "sentence"))
    else:
        refs = [] if target is not None else None
        for n, line in lines[1:]:
            row = line.split("\t")
            if len(row) <= column or not row[column].strip():
                continue
            sources.append(_checked(path, n, row[column], "sentence"))
            if refs is not None:
                refs.append(_checked(path, n, row[target], "reference") if len(row) > target else "")
    if not sources:
        raise ValueError(f"{path}: no sentences")
    if len(sources) > MAX_SENTENCES:
        raise ValueError(f"{path}: {len(sources):,} sentences, more than the {MAX_SENTENCES:,} allowed")
    return sources, refs


def read_sources(path: str) -> list[str]:
    """The source sentences of the file (see the module docstring)."""
    return read_sentences(path)[0]
