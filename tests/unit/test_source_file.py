"""A file of sentences (explorer.studies.common.source_file): every input the help names still reads as
before; a sentence or reference longer than MAX_SENTENCE_CHARS, and a tab in a file whose first line
names no `source` column, are refused in one line that names the line."""
from __future__ import annotations

import pytest

from explorer.studies.common.source_file import MAX_SENTENCE_CHARS, read_sentences


def _file(tmp_path, text: str, name: str = "in.txt") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def test_lines_and_tsvs_with_a_source_column_read_as_before(tmp_path):
    assert read_sentences(_file(tmp_path, "uno\n\n  dos \r\n")) == (["uno", "dos"], None)
    assert read_sentences(_file(tmp_path, "\ufeffid\tsource\treference\n1\tuno\tone\n2\tdos\ttwo\n")) == \
        (["uno", "dos"], None)
    assert read_sentences(_file(tmp_path, "src\ttgt\nuno\tone\n\t\ndos\n")) == (["uno", "dos"], ["one", ""])
    at_limit = "a" * MAX_SENTENCE_CHARS
    assert read_sentences(_file(tmp_path, f"x\n{at_limit}\n"))[0] == ["x", at_limit]
    assert read_sentences(_file(tmp_path, f"source\ttarget\n{at_limit}\t{at_limit}\n")) == ([at_limit], [at_limit])


@pytest.mark.parametrize("text, line, what", [
    ("uno\n\ndos\n" + "one " * 2_500 + "\n", 4, "sentence"),                      # blank lines counted
    ("source\ttarget\nuno\tone\n" + "one " * 600 + "\tx\n", 3, "sentence"),
    ("source\ttarget\nuno\tone\ndos\t" + "x" * (MAX_SENTENCE_CHARS + 1) + "\n", 3, "reference"),
])
def test_a_sentence_longer_than_the_limit_is_refused_with_its_line(tmp_path, text, line, what):
    with pytest.raises(ValueError) as refused:
        read_sentences(_file(tmp_path, text))
    said = str(refused.value)
    assert f"line {line}: a {what} of" in said and f"more than the {MAX_SENTENCE_CHARS:,} allowed" in said
    assert "\n" not in said and len(said) < 300


def test_a_tab_in_a_file_without_a_source_header_is_refused_not_translated(tmp_path):
    with pytest.raises(ValueError, match=r"line 1 holds a tab, but line 1, the first, names no 'source'") as first:
        read_sentences(_file(tmp_path, "foo\tbar\none\tx\n"))
    assert "one sentence per line without tabs" in str(first.value)
    with pytest.raises(ValueError, match=r"line 4 holds a tab, but line 2, the first"):
        read_sentences(_file(tmp_path, "\nuno\ndos\ntres\tthree\n"))
