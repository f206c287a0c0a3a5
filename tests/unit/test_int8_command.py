"""`--int8` on the evaluate command: its lines and its card.json section say int8, the float figures stay,
and a request it cannot serve is refused in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.model import int8
from explorer.store.checkpoint import read_card
from support.model_helpers import short_numbers_copy



@pytest.fixture
def numbers(tmp_path) -> Path:
    return short_numbers_copy(tmp_path / "numbers", 4)


@pytest.mark.skipif(int8.engine() is None, reason="this torch has no int8 engine")
def test_evaluate_int8_says_so_and_keeps_the_float_figures(numbers, capsys):
    from explorer.evaluation.command import main

    before = read_card(numbers)["test"]
    assert main([str(numbers), "--beam", "2", "--int8"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(" int8 " in line for line in lines)
    card = read_card(numbers)
    assert card["test"] == before                                   # the float model's figures are not replaced
    section = card["test_int8"]
    assert section["n"] == 4 and section["int8"].startswith(int8.INT8_KERNEL)
    assert {"greedy", "beam2", "test_loss"} <= set(section)
    assert main([str(numbers), "--beam", "2", "--no-write"]) == 0
    assert " int8 " not in capsys.readouterr().out                  # the float model one flag away


def test_evaluate_int8_on_a_gpu_is_refused_in_one_line(numbers, capsys, monkeypatch):
    import torch

    from explorer.evaluation import command

    monkeypatch.setattr(command, "device_argument", str)              # as on a machine with CUDA
    monkeypatch.setattr(command, "resolve_device", torch.device)
    main = command.main
    card = json.loads((numbers / "card.json").read_text())
    assert main([str(numbers), "--int8", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--int8" in err and "\n" not in err and "Traceback" not in err
    assert json.loads((numbers / "card.json").read_text()) == card


def test_evaluate_int8_without_an_engine_is_refused_in_one_line(numbers, capsys, monkeypatch):
    from explorer.evaluation.command import main

    monkeypatch.setattr(int8, "engine", lambda: None)
    assert main([str(numbers), "--int8", "--limit", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "int8 engine" in err and "\n" not in err
