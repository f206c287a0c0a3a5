"""AppTest of the Positional-encoding page on a real checkpoint: it runs, the heatmap is the model's
table, the sliders change it, the norms come from the sentence's capture, learned positions are
shown as such, and bad input gives messages instead of tracebacks.

Checkpoint: checkpoints/bible-es-en, else checkpoints/numbers-en-de, else the newest
runs/*/checkpoints/step_*; the tests skip (saying so) when there is none.
"""
from __future__ import annotations

import base64
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.checkpoint import load_checkpoint, save_checkpoint
from explorer.checkpoint_list import list_checkpoints
from explorer.model import Transformer, sinusoidal_table

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGE = "explorer/ui/pages/positions.py"
SENTENCES = {"es": "En el principio creó Dios los cielos y la tierra.", "en": "three hundred and twenty one"}


@pytest.fixture(scope="module")
def checkpoint():
    """(CheckpointInfo, sentence) of the checkpoint to test on."""
    shipped = [ROOT / "checkpoints" / n for n in ("bible-es-en", "numbers-en-de")]
    runs = sorted(ROOT.glob("runs/*/checkpoints/step_*/model.safetensors"), key=lambda p: p.stat().st_mtime)
    for path in [p for p in shipped if (p / "model.safetensors").is_file()] + [p.parent for p in runs[::-1]]:
        info = next((i for i in list_checkpoints(ROOT / "checkpoints", ROOT / "runs") if i.path == path), None)
        if info is not None and not info.error:
            return info, SENTENCES.get(info.meta.get("src_lang"), "a short test sentence")
    pytest.skip("no checkpoint: needs checkpoints/bible-es-en, checkpoints/numbers-en-de "
                "or runs/*/checkpoints/step_*")


@pytest.fixture(autouse=True)
def default_roots(monkeypatch):
    """The app lists checkpoints/ and runs/ unless a test points it elsewhere."""
    monkeypatch.delenv("EXPLORER_CHECKPOINT_ROOTS", raising=False)
    monkeypatch.delenv("EXPLORER_RUNS_DIR", raising=False)


def open_page(ckpt_name: str, text: str | None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["ckpt"] = ckpt_name
    if text is not None:
        at.session_state["text"] = text
    at.switch_page(PAGE)
    return at.run()


def chart(at: AppTest, key: str) -> dict:
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    assert found, f"no chart {key!r}; charts: {[c.proto.id for c in at.get('plotly_chart')]}"
    return json.loads(found[0].proto.spec)


def array(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return data.reshape([int(n) for n in str(value["shape"]).split(",")]) if "shape" in value else data  # "3, 4"
    return np.asarray(value)


def heatmap(at: AppTest, key: str = "pe_heatmap") -> np.ndarray:
    return array(chart(at, key)["data"][0]["z"])


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def test_page_shows_the_models_own_table(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    assert not at.exception, [e.value for e in at.exception]
    cfg = load_checkpoint(info.path, device="cpu").config
    assert at.select_slider(key="pe_d").value == cfg.d_model
    assert at.select_slider(key="pe_base").value == cfg.pe_base
    n = at.slider(key="pe_len").value
    assert np.array_equal(heatmap(at), sinusoidal_table(n, cfg.d_model, cfg.pe_base).numpy())
    for key in ("pe_curves", "pe_similarity", "pe_waves", "pe_norms"):
        chart(at, key)
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Table as CSV", "Similarity matrix as CSV", "Norms as CSV", "Download the whole analysis (JSON)"} <= labels


def test_sliders_change_the_heatmap(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    before = heatmap(at)
    at.select_slider(key="pe_base").set_value(1000.0).run()
    after = heatmap(at)
    n, d = at.slider(key="pe_len").value, at.select_slider(key="pe_d").value
    assert not np.allclose(before, after)
    assert np.array_equal(after, sinusoidal_table(n, d, 1000.0).numpy())
    assert "base=1000" in chart(at, "pe_waves")["layout"]["title"]["text"]
    at.select_slider(key="pe_d").set_value(32).run()
    at.slider(key="pe_len").set_value(20).run()
    assert not at.exception
    assert heatmap(at).shape == (20, 32)
    assert np.array_equal(heatmap(at), sinusoidal_table(20, 32, 1000.0).numpy())
    sim = heatmap(at, "pe_similarity")
    assert sim.shape == (20, 20) and np.allclose(np.diag(sim), 16, atol=1e-3)


def test_curves_follow_the_chosen_dimensions(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    at.multiselect(key="pe_dims").set_value([3, 10]).run()
    data = chart(at, "pe_curves")["data"]
    table = heatmap(at)
    assert [t["name"].split(" (")[0] for t in data] == ["dim 3", "dim 10"]
    assert np.allclose(array(data[1]["y"]), table[:, 10])


def test_norms_of_the_current_sentence(checkpoint):
    info, text = checkpoint
    at = open_page(info.name, text)
    ckpt = load_checkpoint(info.path, device="cpu")
    src = ckpt.tokenizer.encode(text, side="src") + [3]
    data = chart(at, "pe_norms")["data"]
    tok, pos = array(data[0]["y"]), array(data[1]["y"])
    assert len(tok) == len(pos) == len(src)
    assert np.allclose(pos, math.sqrt(ckpt.config.d_model / 2), rtol=1e-4)   # sinusoidal: sqrt(d/2) everywhere
    expected = ckpt.model.encoder.embed.lookup.weight.detach()[src].norm(dim=-1) * math.sqrt(ckpt.config.d_model)
    assert np.allclose(tok, expected.numpy(), rtol=1e-4)
    at.radio(key="pe_side").set_value("decoder (output)").run()
    assert not at.exception
    assert chart(at, "pe_norms")["data"][0]["y"] != data[0]["y"]


def test_empty_text_still_shows_the_table(checkpoint):
    info, _ = checkpoint
    at = open_page(info.name, "")
    assert not at.exception
    assert "Type a sentence" in texts(at.info)
    chart(at, "pe_heatmap")
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-pe_norms")]


def test_learned_positions_are_shown_as_such(checkpoint, tmp_path, monkeypatch):
    info, text = checkpoint
    real = load_checkpoint(info.path, device="cpu")
    cfg = replace(real.config, positions="learned", d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                  n_decoder_layers=1, max_len=64)
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    save_checkpoint(tmp_path / "runs" / "learned" / "checkpoints" / "step_000001", model, real.tokenizer,
                    meta={"name": "learned-test", "src_lang": real.meta.get("src_lang"),
                          "tgt_lang": real.meta.get("tgt_lang"), "training": {"step": 1}})
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path / "runs"))
    at = open_page("learned-test", text)
    assert not at.exception, [e.value for e in at.exception]
    assert "learns" in texts(at.info)
    n = at.slider(key="pe_len").value
    shown = heatmap(at, "pe_learned")
    assert np.allclose(shown, model.encoder.embed.position_table.weight.detach().numpy()[:n])
    pos = array(chart(at, "pe_norms")["data"][1]["y"])                         # learned rows: not sqrt(d/2)
    table = model.encoder.embed.position_table.weight.detach().numpy()
    assert np.allclose(pos, np.linalg.norm(table[:len(pos)], axis=1), rtol=1e-4)


def test_damaged_checkpoint_falls_back_to_the_paper(checkpoint, tmp_path, monkeypatch):
    info, text = checkpoint
    broken = tmp_path / "runs" / "broken" / "checkpoints" / "step_000001"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{ not json")
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path / "runs"))
    at = open_page("broken/checkpoints/step_000001", text)
    assert not at.exception
    assert at.error, "the damaged checkpoint must be reported"
    assert at.select_slider(key="pe_d").value == 512 and at.select_slider(key="pe_base").value == 10000.0
    assert "Pick a working checkpoint" in texts(at.info)
