"""AppTest of the user's models folder ($EXPLORER_MODELS_DIR) and of the sidebar's model card.

The picker lists the shipped checkpoints, then the models folder, then the runs directory; the app
only reads the models folder; a missing one is said in the sidebar, not a traceback; and the
sidebar shows the chosen model's card, or "no model card" when it has none or is damaged.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.store.card import model_card, summary
from explorer.store.checkpoint import read_card
from support.app_support import ROOT, copy, damage, no_exception, open_app, texts
from webapp import state
from webapp.sidebar import LISTED

SOURCE = ROOT / "checkpoints" / "numbers-en-de"


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """(models folder holding "my-model", runs folder holding one run checkpoint), with the app
    listing checkpoints/ + $EXPLORER_MODELS_DIR + $EXPLORER_RUNS_DIR."""
    if not (SOURCE / "model.safetensors").is_file():
        pytest.skip(f"needs the shipped checkpoint {SOURCE.name}")
    models, runs = tmp_path / "models", tmp_path / "runs"
    copy(SOURCE, models / "my-model")
    copy(SOURCE, runs / "zz-run" / "checkpoints" / "step_000010")
    monkeypatch.delenv(state.ROOTS_ENV, raising=False)
    monkeypatch.setenv(state.MODELS_ENV, str(models))
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(runs))
    state.refresh_checkpoints()
    yield models, runs
    state.refresh_checkpoints()


def picker(at):
    return at.sidebar.selectbox(key="ckpt_pick")


def card_text(at) -> str:
    expanders = [e for e in at.sidebar.expander if e.label == "Model card"]
    assert len(expanders) == 1, [e.label for e in at.sidebar.expander]
    return texts(expanders[0].caption).replace("\\", "")


def files(folder: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def test_the_models_folder_is_listed_after_the_shipped_ones_and_before_the_runs(folders):
    models, runs = folders
    assert state.checkpoint_roots() == (ROOT / "checkpoints", models, runs.resolve())
    before = files(models)
    at = open_app("my-model", text="three hundred")
    no_exception(at)
    paths = list(at.session_state[LISTED])                                    # the picker's order
    where = ["shipped" if p.startswith(str(ROOT / "checkpoints")) else "models" if p.startswith(str(models))
             else "runs" if p.startswith(str(runs)) else p for p in paths]
    assert where == sorted(where, key=["shipped", "models", "runs"].index) and set(where) == {"shipped", "models", "runs"}
    assert at.session_state["checkpoint_path"] == str(models / "my-model")
    for page in ("translate", "attention", "beam", "checkpoints"):         # using it only reads it
        at.switch_page(f"webapp/pages/{page}.py").run()
        no_exception(at)
    assert files(models) == before
    assert "EXPLORER_MODELS_DIR" in picker(at).help


@pytest.mark.parametrize("how", ["missing", "a file"])
def test_a_models_folder_that_cannot_be_listed_is_said_in_the_sidebar(folders, how, tmp_path, monkeypatch):
    wrong = tmp_path / "nowhere"
    if how == "a file":
        wrong.write_text("not a folder")
    monkeypatch.setenv(state.MODELS_ENV, str(wrong))
    state.refresh_checkpoints()
    at = open_app("numbers-en-de", text="three hundred")
    no_exception(at)
    warning = texts(at.sidebar.warning).replace("\\", "")
    assert state.MODELS_ENV in warning and str(wrong) in warning, warning
    assert ("does not exist" if how == "missing" else "is not a folder") in warning
    assert at.session_state["checkpoint_path"] == str(ROOT / "checkpoints" / "numbers-en-de")


def test_checkpoint_roots_still_replace_everything(folders, tmp_path, monkeypatch):
    models, _ = folders
    only = tmp_path / "only"
    copy(SOURCE, only / "lonely")
    monkeypatch.setenv(state.ROOTS_ENV, str(only))
    assert state.checkpoint_roots() == (only,)
    state.refresh_checkpoints()
    at = open_app(None, text="three hundred")
    no_exception(at)
    assert [Path(p).name for p in at.session_state[LISTED]] == ["lonely"]
    assert not at.sidebar.warning


def test_the_sidebar_shows_the_chosen_models_card(folders):
    models, _ = folders
    card = read_card(models / "my-model")
    card["model_card"] = {"source": "Helsinki-NLP/opus-mt-en-de", "license": "cc-by-4.0", "languages": ["en", "de"],
                          "parameters": 74410496, "domain": "OPUS <b>web</b> text", "converted": "2026-11-23T10:00",
                          "tool": "explorer.convert from-hf"}
    (models / "my-model" / "card.json").write_text(json.dumps(card))
    state.refresh_checkpoints()
    at = open_app("my-model", text="three hundred")
    no_exception(at)
    shown = card_text(at)
    for part in ("Helsinki-NLP/opus-mt-en-de", "cc-by-4.0", "en → de", "74.4M parameters", "OPUS <b>web</b> text",
                 "explorer.convert from-hf", "d_model 128"):
        assert part in shown, shown

    at = open_app("numbers-en-de", text="three hundred")                   # a shipped one: its own card
    assert summary(model_card(read_card(SOURCE))).replace("\\", "") in card_text(at)


@pytest.mark.parametrize("how", ["no card", "garbage", "damaged"])
def test_no_card_or_a_damaged_checkpoint_says_no_model_card(folders, how):
    models, _ = folders
    path = models / "my-model"
    if how == "no card":
        (path / "card.json").unlink()
    elif how == "garbage":
        (path / "card.json").write_text(json.dumps({"model_card": ["not", "an", "object"], "test": 3}))
    else:
        damage(SOURCE, models / "broken", "header")
        path = models / "broken"
    state.refresh_checkpoints()
    at = open_app(path.name, text="three hundred")
    no_exception(at)
    assert at.session_state["checkpoint_path"] == str(path)
    assert "no model card" in card_text(at)


@pytest.mark.parametrize("page", [None, "webapp/pages/train.py", "webapp/pages/checkpoints.py"])
def test_a_runs_folder_setting_that_names_a_file_is_said_on_every_page(tmp_path, monkeypatch, page):
    """$EXPLORER_RUNS_DIR naming a file: every page reads or writes there, so each says what is wrong, in
    one message and no traceback (runs_root refuses it, as the commands do)."""
    afile = tmp_path / "runs.txt"
    afile.write_text("not a folder")
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(afile))
    at = open_app("numbers-en-de", page)
    no_exception(at)
    said = texts(at.error).replace("\\", "")
    assert "The app cannot start" in said and "a regular file, not a folder" in said
    assert afile.read_text() == "not a folder"
