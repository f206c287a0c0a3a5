"""The number minimal pairs: one unit word changed (the last), most of them not the first word."""
from pathlib import Path

import pytest

from explorer.studies.patching.number_pairs import main, number_pair, number_pairs

NUMBERS_TEST = Path(__file__).resolve().parents[2] / "checkpoints" / "numbers-en-de" / "test.tsv"


def test_the_last_unit_word_changes_to_the_next():
    pair = number_pair("three hundred and twenty one")
    assert (pair.corrupt, pair.word) == ("three hundred and twenty two", 4)
    assert number_pair("nine").corrupt == "one"                       # nine wraps to one
    assert number_pair("twenty thousand") is None                     # no unit word: no pair
    assert number_pair("seven hundred and ten").word == 0             # the only unit word may be the first


def test_pairs_differ_in_one_word_and_mostly_not_the_first():
    from explorer.data.files import read_tsv

    pairs = number_pairs((p.src for p in read_tsv(str(NUMBERS_TEST))), 100)
    assert len(pairs) == 100
    for p in pairs:
        clean, corrupt = p.clean.split(), p.corrupt.split()
        assert len(clean) == len(corrupt)
        assert [i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b] == [p.word]
    assert sum(p.word > 0 for p in pairs) >= 50


def test_command_writes_pairs_and_refuses_bad_counts(tmp_path, capsys):
    out = tmp_path / "pairs.tsv"
    assert main([str(NUMBERS_TEST), "--pairs", "5", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 5 and all(line.count("\t") == 1 for line in lines)
    for bad in ("0", "1001"):
        with pytest.raises(SystemExit) as stop:
            main([str(NUMBERS_TEST), "--pairs", bad, "--out", str(out)])
        assert stop.value.code == 2 and "pairs >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError):
        number_pairs(["one"], 10_000)


def test_the_command_never_writes_over_what_it_reads_or_into_a_model(tmp_path, capsys):
    """`--out` the TSV it reads (a checkpoint's test.tsv named twice) replaced that file with the pairs."""
    mine = tmp_path / "test.tsv"
    mine.write_bytes(NUMBERS_TEST.read_bytes())
    assert main([str(mine), "--pairs", "5", "--out", str(mine)]) == 2
    assert "reads it too" in capsys.readouterr().err and mine.read_bytes() == NUMBERS_TEST.read_bytes()
    before = NUMBERS_TEST.read_bytes()
    try:
        assert main([str(mine), "--pairs", "5", "--out", str(NUMBERS_TEST)]) == 2      # inside the shipped model
        assert "inside the model folder" in capsys.readouterr().err and NUMBERS_TEST.read_bytes() == before
    finally:
        if NUMBERS_TEST.read_bytes() != before:              # a regression's write does not stay in the checkout
            NUMBERS_TEST.write_bytes(before)
