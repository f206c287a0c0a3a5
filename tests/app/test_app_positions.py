"""AppTest of the Positional-encoding page on a real checkpoint: it runs, the heatmap is the model's
table, the sliders change it, the norms come from the sentence's capture, learned positions are
shown as such, and bad input gives messages instead of tracebacks.

Checkpoint: checkpoints/bible-es-en, else checkpoints/numbers-en-de, else the newest
runs/*/checkpoints/step_*; the tests skip (saying so) when there is none.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from support.app_support import (array, chart, checkpoint, default_roots, no_exception,  # noqa: F401
                                  only_a_broken_checkpoint,
                                  open_app, texts)
from explorer.store.checkpoint import load_checkpoint, save_checkpoint
from explorer.model import Transformer, sinusoidal_table

PAGE = "webapp/pages/positions.py"
pytestmark = pytest.mark.usefixtures("default_roots")


def open_page(ckpt_name: str, text: str | None, **query):
    return open_app(ckpt_name, PAGE, text, query)


def heatmap(at, key: str = "pe_heatmap") -> np.ndarray:
    return array(chart(at, key)["data"][0]["z"])


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
    at.radio(key="pe_side").set_value("decoder").run()
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
    at = open_page(only_a_broken_checkpoint(tmp_path, monkeypatch), text)
    assert not at.exception
    assert at.error, "the damaged checkpoint must be reported"
    assert at.select_slider(key="pe_d").value == 512 and at.select_slider(key="pe_base").value == 10000.0
    assert "Pick a working checkpoint" in texts(at.info)


def test_the_sliders_and_the_side_are_in_the_url_clamped(checkpoint):
    """A link's d_model, base, positions shown and side reopen the same view; a count beyond the slider
    is its end and the URL says so; a malformed base is the model's own; unknown keys are dropped."""
    info, text = checkpoint
    at = open_page(info.name, text, d=32, base=1000, n=99999, side="decoder", nonsense="1")
    no_exception(at)
    longest = at.slider(key="pe_len").max
    assert (at.select_slider(key="pe_d").value, at.select_slider(key="pe_base").value) == (32, 1000.0)
    assert at.slider(key="pe_len").value == longest and at.radio(key="pe_side").value == "decoder"
    assert {k: at.query_params[k] for k in ("d", "base", "n", "side")} == \
        {"d": "32", "base": "1000", "n": str(int(longest)), "side": "decoder"}
    assert "nonsense" not in at.query_params
    assert np.array_equal(heatmap(at), sinusoidal_table(int(longest), 32, 1000.0).numpy())
    at.slider(key="pe_len").set_value(20).run()
    assert at.query_params["n"] == "20"
    bad = open_page(info.name, text, base="<b>", d="-3")                # a word: the default; a number: clamped
    no_exception(bad)
    cfg = load_checkpoint(info.path, device="cpu").config
    assert bad.select_slider(key="pe_base").value == cfg.pe_base and bad.query_params["base"] == f"{cfg.pe_base:g}"
    assert bad.select_slider(key="pe_d").value == 16 and bad.query_params["d"] == "16"      # -3: clamped to the least
    between = open_page(info.name, text, base="150.5")                 # between two offered bases: the nearer
    no_exception(between)
    assert between.select_slider(key="pe_base").value == 100.0 and between.query_params["base"] == "100"


def test_the_checkpoints_own_figures_and_files_are_named_after_it(checkpoint, monkeypatch):
    """One export convention (webapp/downloads.py): what this checkpoint's sentence shows (the norms, their CSV,
    the analysis JSON) is saved under the checkpoint's name, in the sidebar's figure format; the sinusoidal
    explorer, which does not depend on the checkpoint, is named by its own settings (d_model, base)."""
    from support.exports import figure_exports, recorded_downloads

    info, text = checkpoint
    seen = recorded_downloads(monkeypatch)
    at = open_app(info.name, PAGE, text, session={"figure_format": "svg"})
    no_exception(at)
    exports = figure_exports(at)
    assert all(options.get("format") == "svg" for options in exports.values()), exports
    assert exports["pe_norms"]["filename"].startswith(info.name)
    assert exports["pe_heatmap"]["filename"].startswith("pe_d")
    named = {b["label"]: b["file_name"] for b in seen}
    for label in ("Norms as CSV", "Download the whole analysis (JSON)"):
        assert named[label].startswith(info.name), (label, named)


def test_a_key_repeated_in_a_link_is_written_back_once(checkpoint):
    """n=20&n=30 (a link edited by hand): the slider shows one of them and the URL then holds that one
    alone, so a reload or a copied link opens what is shown."""
    info, text = checkpoint
    at = open_page(info.name, text)
    at.query_params["n"] = ["20", "30"]
    at.run()
    no_exception(at)
    shown = at.slider(key="pe_len").value
    assert shown in (20, 30) and at.query_params["n"] in (str(shown), [str(shown)])
