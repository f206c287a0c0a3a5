"""Numbers and names that drift when written twice, held to the one fact they copy.

Why: the analyses capped `--sentences` at "a whole shipped test set (1000 Bible pairs)" while
bible-es-en's holds 1,002 (so a whole one was refused); `python -m benchmarks` listed helper modules as
benchmarks (and `load_report` raised AttributeError); `python -m explorer search --help` said `usage:
python -m explorer.contrastive`, a door the docs do not name.
"""
from __future__ import annotations

import contextlib
import io

import pytest

from benchmarks.__main__ import _has_main, available
from explorer.__main__ import COMMANDS, main as explorer
from explorer.studies.contributions.__main__ import build_parser as contributions_parser
from explorer.data.files import read_tsv
from explorer.evaluation.arguments import ArgumentsError
from explorer.evaluation.scores import MAX_HELD_OUT
from explorer.studies.heads.__main__ import build_parser as heads_parser
from explorer.studies.lens.__main__ import build_parser as lens_parser
from support.app_support import ROOT


def test_the_sentence_cap_is_the_largest_shipped_test_set():
    sizes = [len(read_tsv(str(p))) for p in sorted((ROOT / "checkpoints").glob("*/test.tsv"))]
    assert sizes and MAX_HELD_OUT == max(sizes)


@pytest.mark.parametrize("parser", [heads_parser, lens_parser, contributions_parser])
def test_every_analysis_takes_a_whole_shipped_test_set_and_refuses_one_more(parser):
    ckpt = str(ROOT / "checkpoints" / "bible-es-en")
    assert parser().parse_args([ckpt, "--sentences", str(MAX_HELD_OUT)]).sentences == MAX_HELD_OUT
    with pytest.raises(ArgumentsError):
        parser().parse_args([ckpt, "--sentences", str(MAX_HELD_OUT + 1)])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_commands_help_names_the_one_door(command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        explorer([command, "--help"])
    assert done.value.code == 0
    assert out.getvalue().startswith(f"usage: python -m explorer {command} "), out.getvalue()[:80]


def test_the_benchmarks_listed_are_the_modules_with_a_main():
    names = available()
    modules = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_"))
    assert names == [m for m in modules if _has_main(m)]
    assert "load_report" not in names and "browser" not in names and "decode" in names
