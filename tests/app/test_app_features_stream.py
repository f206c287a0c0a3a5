"""AppTests of the Features page's residual-stream sites on the shipped numbers-en-de: the picker lists every
FFN, then every layer's stream, labelled as an SAE; a stream without a dictionary offers the background job;
with one (the app's one-site job, small settings, run here) the page draws its features, a feature's page
and steering, the site in the URL."""
from __future__ import annotations

import pytest
import torch

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.features.job import SITE, FeatureSettings, site_result_path
from support.app_support import ROOT, array, chart, no_exception, open_app

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
PAGE = "webapp/pages/features.py"
TEXT = "three hundred and twenty one"
SMALL = FeatureSettings(sae_width=64, sae_k=4, steps=40, batch=256, rows=3000, held_rows=500)
STREAM = "encoder.layers.1.resid"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs folder holding the app's one-site job's SAE of numbers-en-de's last encoder layer's stream."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_RUNS_DIR", str(root))
        ckpt = load_checkpoint(NUMBERS)
        corpus = load_corpus("numbers")
        SITE.to_file(site_result_path(ckpt.meta["weights_sha256"], STREAM), ckpt.model, ckpt.tokenizer,
                     corpus.train[:5000], corpus.dev, SMALL, site=STREAM, context=RunContext(meta=ckpt.meta))
    return root


@pytest.fixture
def env(runs, monkeypatch):
    monkeypatch.delenv("EXPLORER_CHECKPOINT_ROOTS", raising=False)
    monkeypatch.delenv("EXPLORER_MODELS_DIR", raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(runs))
    return runs


def shown(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "success", "subheader")
                    for e in at.get(kind))


def test_the_picker_lists_the_streams_after_the_ffns_and_offers_the_job(env):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "enc1r"})
    no_exception(at)
    picker = at.selectbox(key="features_site")
    assert picker.options == ["Encoder layer 1", "Encoder layer 2", "Decoder layer 1", "Decoder layer 2",
                              "Encoder layer 1: residual stream (SAE)", "Encoder layer 2: residual stream (SAE)",
                              "Decoder layer 1: residual stream (SAE)", "Decoder layer 2: residual stream (SAE)"]
    assert picker.value == "encoder.layers.0.resid" and at.query_params["site"] == "enc1r"
    assert "residual stream (SAE)** site's is a sparse autoencoder" in shown(at)
    assert "Encoder layer 1: residual stream (SAE) has no dictionary yet" in shown(at)
    assert "sparse autoencoder" in shown(at) and "residual-stream vectors" in shown(at)
    assert any(b.label == "Train Encoder layer 1: residual stream (SAE)'s dictionary" for b in at.button)


def test_a_stream_sites_page_draws_and_steers(env):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "enc2r"})
    no_exception(at)
    assert at.selectbox(key="features_site").value == STREAM
    heat = next(t for t in chart(at, "features_positions")["data"] if t["type"] == "heatmap")
    values = array(heat["z"])                                                   # [shown, L]
    assert values.shape[1] == len(heat["x"]) >= 5 and values[0].max() > 0
    assert "Held-out fraction of variance explained" in shown(at) and "linear map" not in shown(at)
    feature = at.selectbox(key="features_feature").value
    assert f"Feature #{feature} of Encoder layer 2: residual stream (SAE)" in shown(at)
    assert all("⟦" in c for c in at.dataframe[0].value["context"])
    assert "With feature" in shown(at) and chart(at, "features_steer")["data"]
