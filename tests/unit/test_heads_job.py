"""The head-lab job: JSON keys and 1-based numbering, cancellation leaves no file, the command runs."""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from explorer.studies.common.context import RunContext
from explorer.studies.heads.job import HEAD_LAB, LabSettings, estimate_cost
from explorer.inspection.trace import KINDS
from explorer.runtime.progress import Cancelled
from support.model_helpers import IdTokenizer



PAIRS = [SimpleNamespace(src="5 6 7", tgt="8 9"), SimpleNamespace(src="10 11 12 13", tgt="14 15 16"),
         SimpleNamespace(src="17 18", tgt="19")]
SETTINGS = LabSettings(sentences=3, seeds=1, points=1, batch_size=2)


def test_the_json_has_every_section_one_based(model, tmp_path):
    out = tmp_path / "lab.json"
    stages = []
    HEAD_LAB.to_file(out, model, IdTokenizer(), PAIRS, SETTINGS, context=RunContext(
        meta={"name": "tiny", "weights_sha256": "abc"}, progress=lambda stage, done, total: stages.append(stage)))
    data = json.loads(out.read_text())
    assert {"stats", "roles", "importance", "single_head_removal", "pruning", "settings"} <= set(data)
    assert data["settings"] | {} == {**data["settings"], "weights_sha256": "abc", "sentences": 3,
                                     "forced": "reference", "seeds": 1}
    n_heads = model.cfg.n_heads
    for section in ("stats", "roles", "importance", "single_head_removal"):
        rows = data[section]
        assert len(rows) == 6 * n_heads                                          # 2 layers x 3 kinds
        assert {r["kind"] for r in rows} == set(KINDS)
        assert min(r["layer"] for r in rows) == 1 and max(r["layer"] for r in rows) == 2
        assert min(r["head"] for r in rows) == 1 and max(r["head"] for r in rows) == n_heads
    curves = data["pruning"]["curves"]
    assert {c["scope"] for c in curves} == set(KINDS) | {"all"}
    assert all(c["bleu"][0] == data["pruning"]["full"]["bleu"] for c in curves)
    assert all(h["layer"] >= 1 and h["head"] >= 1 for c in curves for h in c["heads"])
    assert "confidence_std" in data["stats"][0]
    assert "held-out pairs" in data["rare_frequencies"]
    assert stages[0] == "statistics" and stages[-1] == "pruning"
    assert data["pruning"]["decodes"] <= estimate_cost(model, SETTINGS, 3).decodes


@pytest.mark.parametrize("stage", ["statistics", "importance", "pruning"])
def test_a_cancelled_job_leaves_no_file(model, tmp_path, stage):
    out = tmp_path / "lab.json"
    with pytest.raises(Cancelled):
        HEAD_LAB.to_file(out, model, IdTokenizer(), PAIRS, SETTINGS, context=RunContext(
            progress=lambda s, done, total: False if s == stage and done > 0 else None))
    assert list(tmp_path.iterdir()) == []


def test_a_set_event_cancels(model, tmp_path):
    event = threading.Event()
    event.set()
    with pytest.raises(Cancelled):
        HEAD_LAB.to_file(tmp_path / "lab.json", model, IdTokenizer(), PAIRS, SETTINGS, context=RunContext(cancel=event))
    assert list(tmp_path.iterdir()) == []


def test_the_cost_grows_with_heads_and_sentences(model):
    small, big = estimate_cost(model, SETTINGS, 3), estimate_cost(model, SETTINGS, 300)
    assert big.forward_passes > small.forward_passes and big.backward_passes > small.backward_passes
    assert small.decodes >= 1 + 6 * model.cfg.n_heads                           # the full model + every head alone
    with pytest.raises(ValueError):
        LabSettings(forced="beam")


def test_the_command_on_the_shipped_numbers_checkpoint(tmp_path, capsys):
    from explorer.studies.heads.__main__ import main

    out = tmp_path / "numbers.json"
    assert main(["checkpoints/numbers-en-de", "--sentences", "6", "--seeds", "0", "--points", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cost:" in printed and "importance (Michel" in printed and "pruning curves" in printed
    data = json.loads(out.read_text())
    assert data["settings"]["checkpoint"] == "numbers-en-de" and data["settings"]["sentences"] == 6
    assert len(data["settings"]["weights_sha256"]) == 64
    assert "training data (numbers" in data["rare_frequencies"] or "held-out" in data["rare_frequencies"]
    assert data["pruning"]["full"]["bleu"] > 50                                  # the shipped model translates numbers
