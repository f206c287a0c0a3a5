"""What `evaluate` writes into card.json: the checkpoint's test figures only when they are of its held-out
test set. The app labels a checkpoint with them ("test BLEU 92.6"): three lines of another file scored 100."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from explorer.evaluation.command import main
from explorer.store.checkpoint import read_card
from support.model_helpers import short_numbers_copy

@pytest.fixture
def numbers(tmp_path) -> Path:
    return short_numbers_copy(tmp_path / "numbers", 4)


def test_another_test_file_leaves_the_cards_test_figures_and_its_own_split_replaces_them(numbers, tmp_path, capsys):
    before = read_card(numbers)["test"]
    other = tmp_path / "three.tsv"
    other.write_text("\n".join((numbers / "test.tsv").read_text(encoding="utf-8").splitlines()[:3]) + "\n",
                     encoding="utf-8")
    assert main([str(numbers), "--test", str(other), "--beam", "2"]) == 0
    assert "not this checkpoint's held-out test split" in capsys.readouterr().err
    assert read_card(numbers)["test"] == before
    assert main([str(numbers), "--test", str(numbers / "test.tsv"), "--beam", "2"]) == 0    # its own split, named
    after = read_card(numbers)["test"]
    assert after != before and after["n"] == 4 and after["test_set"] == "test.tsv"


def test_a_checkpoint_without_a_test_split_takes_the_given_files_figures(numbers, tmp_path):
    """A model imported or trained elsewhere has no held-out split (no test.tsv, no training dataset named):
    the file given is its test set. A run's checkpoint that names its dataset is scored on that split
    without --test; another file does not stand for it."""
    import json

    held = tmp_path / "held.tsv"
    shutil.move(numbers / "test.tsv", held)
    assert main([str(numbers), "--test", str(held), "--beam", "2"]) == 0         # names its dataset: kept
    assert read_card(numbers)["test"]["n"] == 500
    config = json.loads((numbers / "config.json").read_text())
    config["training"].pop("dataset")
    (numbers / "config.json").write_text(json.dumps(config))
    assert main([str(numbers), "--test", str(held), "--beam", "2"]) == 0
    assert read_card(numbers)["test"]["test_set"] == "held.tsv" and read_card(numbers)["test"]["n"] == 4


def test_a_damaged_own_split_lets_no_other_file_stand_for_it(numbers, tmp_path, capsys):
    other = tmp_path / "other.tsv"
    shutil.copy(numbers / "test.tsv", other)
    (numbers / "test.tsv").write_text("one column only\n")
    before = read_card(numbers)["test"]
    assert main([str(numbers), "--test", str(other), "--beam", "2"]) == 0
    assert read_card(numbers)["test"] == before and "card.json keeps its figures" in capsys.readouterr().err
