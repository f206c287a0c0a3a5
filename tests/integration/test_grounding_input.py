"""`python -m explorer grounding --input FILE`, run as a user runs it: a sentence longer than the limit, and a
TSV without a `source` column, are refused in one `error:` line naming the line, exit 2, before the
checkpoint is loaded, and no result file is written."""
from __future__ import annotations

import sys

import pytest

from explorer.studies.common.source_file import MAX_SENTENCE_CHARS
from support.app_support import NUMBERS
from support.train_helpers import env
from support.waiting import run_watched


@pytest.mark.parametrize("text, said", [
    ("three hundred\n\n" + "one " * 250_000 + "\nfour\n", f"line 3: a sentence of 999,999 characters, more than "
                                                          f"the {MAX_SENTENCE_CHARS:,} allowed"),
    ("foo\tbar\none\tx\n", "line 1 holds a tab, but line 1, the first, names no 'source' (or 'src') column"),
])
def test_a_bad_input_file_is_one_error_line_and_no_output(tmp_path, text, said):
    source = tmp_path / "in.txt"
    source.write_text(text)
    out = tmp_path / "g.json"
    done = run_watched([sys.executable, "-m", "explorer", "grounding", str(NUMBERS), "--input", str(source),
                        "--out", str(out)], "grounding", env={**env(), "EXPLORER_RUNS_DIR": str(tmp_path / "runs")})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: --input {source}: ") and said in lines[0], lines[0]
    assert not out.exists() and not (tmp_path / "runs").exists() and done.stdout == ""
