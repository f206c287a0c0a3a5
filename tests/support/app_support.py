"""Helpers for the AppTests of the Translate and Attention pages.

Checkpoints tested: every shipped one of checkpoints/bible-es-en and checkpoints/numbers-en-de that
exists (CI has both), else the newest runs/*/checkpoints/step_*; tests skip, saying why, if none.
"""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from explorer.store.catalog import list_checkpoints
from explorer.store.checkpoint import load_checkpoint
from support.waiting import STALL_S

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("bible-es-en", "numbers-en-de")
SENTENCES = {"es": "Y dijo Dios: Sea la luz: y fué la luz.", "en": "three hundred and twenty one"}
# AppTest fails a script run longer than this: a hang guard (support.waiting), never a timing goal
TIMEOUT = STALL_S


def candidate_checkpoints() -> list[Path]:
    shipped = [ROOT / "checkpoints" / n for n in SHIPPED if (ROOT / "checkpoints" / n / "model.safetensors").is_file()]
    if shipped:
        return shipped
    runs = sorted(ROOT.glob("runs/*/checkpoints/step_*/model.safetensors"), key=lambda p: p.stat().st_mtime)
    return [runs[-1].parent] if runs else []


def checkpoint_params():
    found = candidate_checkpoints()
    if not found:
        why = "no checkpoint: needs checkpoints/bible-es-en, checkpoints/numbers-en-de or runs/*/checkpoints/step_*"
        return [pytest.param(None, marks=pytest.mark.skip(reason=why))]
    return [pytest.param(p, id=p.name) for p in found]


def first_usable_checkpoint(sentences: dict[str, str] = SENTENCES):
    """(CheckpointInfo, a sentence in its source language) of the first shipped checkpoint that
    lists without error, else of the newest runs/*/checkpoints/step_*; None if there is none."""
    shipped = [ROOT / "checkpoints" / n for n in SHIPPED]
    runs = sorted(ROOT.glob("runs/*/checkpoints/step_*/model.safetensors"), key=lambda p: p.stat().st_mtime)
    listed = list_checkpoints(ROOT / "checkpoints", ROOT / "runs")
    for path in shipped + [p.parent for p in runs[::-1]]:
        info = next((i for i in listed if i.path == path), None)
        if info is not None and not info.error:
            return info, sentences.get(info.meta.get("src_lang"), "a short test sentence")
    return None


def usable_checkpoint_or_skip(sentences: dict[str, str] = SENTENCES):
    found = first_usable_checkpoint(sentences)
    if found is None:
        pytest.skip("no checkpoint: needs checkpoints/bible-es-en, checkpoints/numbers-en-de "
                    "or runs/*/checkpoints/step_*")
    return found


GENESIS = {"es": "En el principio creó Dios los cielos y la tierra.", "en": "three hundred and twenty one"}


@pytest.fixture(scope="module")
def checkpoint():
    """(CheckpointInfo, a sentence in its source language) of the checkpoint a page test runs on."""
    return usable_checkpoint_or_skip(GENESIS)


NUMBERS = ROOT / "checkpoints" / "numbers-en-de"


@pytest.fixture(scope="module")
def numbers():
    """(catalog entry, loaded checkpoint) of the shipped numbers-en-de; skips without it."""
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    info, _ = info_for(NUMBERS)
    return info, load_checkpoint(info.path)


@pytest.fixture
def default_roots(monkeypatch):
    """The app lists checkpoints/ and runs/ unless a test points it elsewhere."""
    monkeypatch.delenv("EXPLORER_CHECKPOINT_ROOTS", raising=False)
    monkeypatch.delenv("EXPLORER_MODELS_DIR", raising=False)
    monkeypatch.delenv("EXPLORER_RUNS_DIR", raising=False)


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """The shipped checkpoints, and a temporary runs directory (where the app writes analyses and runs)."""
    monkeypatch.delenv("EXPLORER_CHECKPOINT_ROOTS", raising=False)
    monkeypatch.delenv("EXPLORER_MODELS_DIR", raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def info_for(path: Path):
    """(CheckpointInfo, a sentence in its source language)."""
    info = next((i for i in list_checkpoints(path.parent) if i.path == path), None)
    if info is None or info.error:
        pytest.skip(f"{path} is not a usable checkpoint: {getattr(info, 'error', 'not listed')}")
    return info, SENTENCES.get(info.meta.get("src_lang"), "a short test sentence")


def open_app(ckpt_name: str | None, page: str | None = None, text: str | None = None,
             query: dict | None = None, session: dict | None = None) -> AppTest:
    """Run app.py (optionally switched to a page) with the checkpoint picked by name via the URL;
    `query` adds URL parameters, `session` session-state values set before the first run."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    if ckpt_name:
        at.query_params["ckpt"] = ckpt_name
    for key, value in (query or {}).items():
        at.query_params[key] = str(value)
    if text is not None:
        at.session_state["text"] = text
    for key, value in (session or {}).items():
        at.session_state[key] = value
    if page:
        at.switch_page(page)
    return at.run()


def example_picker(at: AppTest):
    """The Translate page's test-sentence picker (one per checkpoint: its key names the checkpoint)."""
    return next(s for s in at.selectbox if s.label.startswith("Example from the held-out test set"))


def charts(at: AppTest) -> list:
    return list(at.get("plotly_chart"))


def chart(at: AppTest, key: str) -> dict:
    found = [c for c in charts(at) if c.proto.id.endswith("-" + key)]
    assert found, f"no chart {key!r}; charts: {[c.proto.id for c in charts(at)]}"
    return json.loads(found[0].proto.spec)


def has_chart(at: AppTest, key: str) -> bool:
    return any(c.proto.id.endswith("-" + key) for c in charts(at))


def array(value) -> np.ndarray:
    """A plotly array from a figure's JSON (plain list, or plotly's base64 'bdata' form)."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return data.reshape([int(n) for n in str(value["shape"]).split(",")]) if "shape" in value else data
    return np.asarray(value, dtype=float)


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def copy(src: Path, dst: Path) -> Path:
    """Copy a checkpoint directory, named after the copy (config.json "name"), without test.tsv."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("test.tsv"))
    meta = json.loads((dst / "config.json").read_text())
    meta["name"] = dst.name
    (dst / "config.json").write_text(json.dumps(meta))
    return dst


def damage(src: Path, dst: Path, how: str) -> Path:
    """Copy a checkpoint directory (named dst.name) and damage the copy: 'bytes' flips weight bytes (the
    hash no longer matches), 'header' truncates model.safetensors, 'config' writes invalid JSON."""
    copy(src, dst)
    weights = dst / "model.safetensors"
    if how == "bytes":
        data = bytearray(weights.read_bytes())
        for i in range(len(data) - 64, len(data) - 32):
            data[i] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif how == "header":
        weights.write_bytes(weights.read_bytes()[:20])
    elif how == "config":
        (dst / "config.json").write_text("{ not json")
    else:
        raise ValueError(how)
    return dst


def only_a_broken_checkpoint(tmp_path: Path, monkeypatch) -> str:
    """List only one run checkpoint whose config.json is not JSON; returns the name the picker knows it by."""
    broken = tmp_path / "runs" / "broken" / "checkpoints" / "step_000001"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{ not json")
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path / "runs"))
    return "broken/checkpoints/step_000001"


def shown_translation(at) -> str:
    """The text of the Translate page's translation box (markdown '#### ...'): escapes undone and the
    made-up words' marks (webapp.views.grounding.MARK) taken off, so it reads as the model's output."""
    import re

    from webapp.views.grounding import MARK

    shown = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert shown, "no translation on the page"
    return re.sub(rf":{MARK}\[([^\]]*)\]", r"\1", shown[0][5:]).replace("\\", "")
