"""The app with hostile checkpoint directories beside a working one: every page still renders."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.damage import ABSURD
from support.waiting import STALL_S

ROOT = Path(__file__).resolve().parents[2]


def test_an_absurd_checkpoint_does_not_take_the_app_down(tmp_path, monkeypatch):
    """Every page renders with an absurd config.json beside a working checkpoint; it is listed as damaged."""
    from support.app_support import AppTest, first_usable_checkpoint

    found = first_usable_checkpoint()
    if found is None:
        pytest.skip("needs a shipped checkpoint")
    info, sentence = found
    shutil.copytree(info.path, tmp_path / "good")
    for i, kind in enumerate(("huge d_model", "huge max_len", "large dims, tiny weights")):
        shutil.copytree(info.path, tmp_path / f"absurd-{i}")
        config = json.loads((tmp_path / f"absurd-{i}" / "config.json").read_text())
        config["model"].update(ABSURD[kind])
        config["name"] = f"absurd-{i}"
        (tmp_path / f"absurd-{i}" / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path))
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    from webapp import state
    state.refresh_checkpoints()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=STALL_S)   # a hang guard
    at.query_params["ckpt"] = info.name
    at.query_params["text"] = sentence
    at.run()
    for page in ("translate", "attention", "positions", "beam", "train", "schedule", "checkpoints"):
        at.switch_page(f"webapp/pages/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
    labels = list(at.sidebar.selectbox[0].options)
    assert sum("(damaged)" in label for label in labels) == 3, labels
    state.refresh_checkpoints()
