"""The poisoned-pairs demonstration, end to end through the project's trainer (`python -m explorer poison`):
twenty training pairs that render "eleven" as "zwölf" make numbers-en-de write "zwölf" for held-out
numbers; the training pairs that most raised that word are the poisoned ones; the same fine-tune without
them writes "elf" again. The test fine-tunes 200 steps, not the demonstration's 300: 10 of 12 held-out
numbers take the poison there (8 at 150 steps), and CI's time goes further."""
from __future__ import annotations

import json
import sys

import pytest

from explorer.studies.grounding.poison import POISONED, REPORT, TOP
from support.train_helpers import REPO, run

pytestmark = pytest.mark.slow
STEPS = 200


def test_attribution_finds_the_poisoned_pairs_and_training_without_them_restores_the_word(tmp_path):
    if not (REPO / "checkpoints" / "numbers-en-de" / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    out = tmp_path / "demo"
    proc = run([sys.executable, "-m", "explorer", "poison", "--out", str(out), "--threads", "2",
                 "--steps", str(STEPS)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / REPORT).read_text())
    assert report["poisoned_pairs"] == POISONED and report["steps"] == STEPS
    poisoned, clean = report["poisoned"], report["clean"]
    assert poisoned["wrong"] >= report["held_out"] // 2, poisoned["outputs"]          # the poison took
    assert len(report["attribution"]) == poisoned["wrong"]
    for found in report["attribution"]:
        assert found["poisoned_in_top"] >= 18, (found["source"], found["top"][:5])
        assert len(found["top"]) == TOP and "zwölf" in found["top"][0]["tgt"].split()
    assert clean["wrong"] == 0 and clean["right"] == report["held_out"], clean["outputs"]
    # both runs are where the app's checkpoint picker looks, the folder given as a runs root
    from explorer.store.catalog import list_checkpoints
    listed = {i.path.relative_to(tmp_path).parts[:2] for i in list_checkpoints(tmp_path) if not i.error}
    assert {("demo", "poisoned"), ("demo", "clean")} <= listed
