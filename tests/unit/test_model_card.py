"""card.json's "model_card" section: read from untrusted files without raising, summarised in one
line, kept when the evaluate command rewrites card.json, and present in every shipped checkpoint."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from explorer.config import preset
from explorer.model.skeleton import parameter_count
from explorer.store.card import (FINE_TUNE_TOOL, MAX_TEXT, ModelCard, fine_tuned_card, model_card, summary,
                                 versus_paper, with_model_card)
from explorer.store.checkpoint import read_card, read_config

ROOT = Path(__file__).resolve().parents[2]
IMPORTED = {"model_card": {"source": "Helsinki-NLP/opus-mt-es-en", "license": "cc-by-4.0", "languages": ["es", "en"],
                           "parameters": 77929472, "domain": "OPUS (web, subtitles, ...)",
                           "converted": "2026-11-23T10:00:00+00:00", "tool": "explorer.convert from-hf"},
            "test": {"n": 3}}


def test_an_importers_card_reads_whole():
    found = model_card(IMPORTED)
    assert found == ModelCard(source="Helsinki-NLP/opus-mt-es-en", license="cc-by-4.0", languages=("es", "en"),
                              parameters=77929472, domain="OPUS (web, subtitles, ...)",
                              converted="2026-11-23T10:00:00+00:00", tool="explorer.convert from-hf")
    line = summary(found)
    for part in ("Helsinki-NLP/opus-mt-es-en", "cc-by-4.0", "es → en", "77.9M parameters", "OPUS"):
        assert part in line, line


@pytest.mark.parametrize("card", [None, [], "text", 3, {}, {"test": {}}, {"model_card": None},
                                  {"model_card": ["source"]}, {"model_card": "Helsinki-NLP/opus-mt-es-en"}])
def test_no_section_reads_as_no_card(card):
    assert model_card(card) is None
    assert summary(model_card(card)) == "no model card"


@pytest.mark.parametrize("field, value", [
    ("source", 3), ("source", ["a"]), ("source", "   "), ("license", {"x": 1}), ("license", True),
    ("languages", "es"), ("languages", [1, 2]), ("languages", ["es", None]), ("languages", []),
    ("languages", ["x"] * 1000), ("parameters", "77M"), ("parameters", -1), ("parameters", True),
    ("parameters", 1.5), ("domain", 1e9), ("converted", []), ("tool", None),
])
def test_a_field_of_the_wrong_type_reads_as_none(field, value):
    section = {**IMPORTED["model_card"], field: value}
    found = model_card({"model_card": section})
    assert getattr(found, field) is None
    assert found.source is not None or field == "source"          # the other fields are still read
    summary(found)                                                  # and the line is still made


def test_long_and_multi_line_text_is_cut_to_one_line():
    found = model_card({"model_card": {"domain": "a\nb  " + "x" * 10_000, "source": "s"}})
    assert len(found.domain) == MAX_TEXT and "\n" not in found.domain and found.domain.startswith("a b x")


def test_with_model_card_keeps_the_other_sections_and_round_trips():
    card = with_model_card({"test": {"n": 5}, "model_card": {"source": "old"}}, model_card(IMPORTED))
    assert card["test"] == {"n": 5}
    assert model_card(json.loads(json.dumps(card))) == model_card(IMPORTED)


def test_this_model_vs_the_paper():
    assert versus_paper(preset("base")).endswith("the paper's base model")
    small = versus_paper(preset("small"))
    assert small.startswith("d_model 256, 4 heads, 3+3 layers, d_ff 1024") and "(the paper's base: d_model 512" in small
    assert versus_paper(preset("small").to_dict()) == small                 # config.json's "model" too
    assert versus_paper({"d_model": "512"}) is None and versus_paper(None) is None


def test_evaluate_keeps_the_model_card(tmp_path):
    from explorer.evaluation.command import main
    from support.model_helpers import short_numbers_copy

    path = short_numbers_copy(tmp_path / "numbers", 3)
    (path / "card.json").write_text(json.dumps({**IMPORTED, "test": {"stale": True}}))
    assert main([str(path), "--beam", "2"]) == 0
    card = read_card(path)
    assert card["model_card"] == IMPORTED["model_card"]
    assert card["test"]["n"] == 3 and "stale" not in card["test"]        # the results were rewritten
    (path / "card.json").write_text("[1, 2]")                             # not an object: replaced, no crash
    assert main([str(path), "--beam", "2"]) == 0
    assert read_card(path)["test"]["n"] == 3


def test_a_trial_on_part_of_the_test_set_leaves_the_cards_figures(tmp_path, capsys):
    """`evaluate checkpoints/numbers-en-de --limit 2` wrote a 2-sentence BLEU of 100 over the shipped card's
    500-sentence figures, which the app shows as the test set's."""
    source = ROOT / "checkpoints" / "numbers-en-de"
    if not (source / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoint numbers-en-de")
    from explorer.evaluation.command import main

    path = tmp_path / "numbers"
    shutil.copytree(source, path)
    before = (path / "card.json").read_bytes()
    assert main([str(path), "--limit", "2", "--beam", "2"]) == 0
    assert (path / "card.json").read_bytes() == before
    assert "card.json keeps its figures: these are of 2 of the 500 test sentences" in capsys.readouterr().err


SHIPPED = sorted(p.parent for p in (ROOT / "checkpoints").glob("*/config.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_checkpoint_has_a_true_model_card(path):
    meta, cfg = read_config(path)
    found = model_card(read_card(path))
    assert found is not None and found.source and found.domain and found.data
    assert found.parameters == parameter_count(cfg)
    assert found.languages == (meta["src_lang"], meta["tgt_lang"])


def test_a_fine_tuned_card_names_its_parent_and_keeps_what_still_holds():
    card = fine_tuned_card(IMPORTED, "models/opus-mt-es-en", data="uploads/legal.tsv", languages=("es", "en"),
                           parameters=123)
    found = model_card(card)
    parent = model_card(IMPORTED)
    assert found.fine_tuned_from == "models/opus-mt-es-en" and found.tool == FINE_TUNE_TOOL
    assert "models/opus-mt-es-en" in found.source and parent.source in found.source
    assert found.license == parent.license and found.converted is None and found.parameters == 123
    assert parent.domain in found.domain and "before fine-tuning" in found.domain
    assert "uploads/legal.tsv" in found.data and "test" not in card                 # the parent's scores dropped
    assert "models/opus-mt-es-en" in summary(found)


@pytest.mark.parametrize("parent", [None, [], {"test": {"n": 3}}, {"model_card": "garbage"}])
def test_a_fine_tuned_card_of_a_parent_without_one_still_says_where_it_came_from(parent):
    found = model_card(fine_tuned_card(parent, "runs/x/checkpoints/step_000010", data=None, languages=None,
                                       parameters=None))
    assert found.fine_tuned_from == "runs/x/checkpoints/step_000010" and "itself" not in found.source
    assert (found.license, found.domain, found.data, found.languages) == (None, None, None, None)
