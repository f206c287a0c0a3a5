"""evaluate says when test sources are longer than the model's positions: they are cut to max_len ids
before they are translated, and the scores are of the cut sentences (it said nothing before)."""
from __future__ import annotations

import pytest

from explorer.evaluation.command import main
from support.app_support import NUMBERS


@pytest.fixture
def needs_numbers():
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoint numbers-en-de")


def test_sources_cut_at_the_models_positions_are_counted_and_said(tmp_path, capsys, needs_numbers):
    test = tmp_path / "test.tsv"
    test.write_text(f"{'one two three ' * 100}four\t{'eins zwei drei ' * 100}vier\nseven\tsieben\n")
    assert main([str(NUMBERS), "--test", str(test), "--beam", "2", "--no-write"]) == 0
    err = capsys.readouterr().err
    assert "note: 1 of 2 sources fill the model's 256 positions and are cut there" in err


def test_no_note_when_every_source_fits(tmp_path, capsys, needs_numbers):
    test = tmp_path / "test.tsv"
    test.write_text("seven\tsieben\ntwenty one\tein und zwanzig\n")
    assert main([str(NUMBERS), "--test", str(test), "--beam", "2", "--no-write"]) == 0
    assert "are cut there" not in capsys.readouterr().err
