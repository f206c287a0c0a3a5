"""AppTests of the Features page's residual-stream sites on the shipped numbers-en-de: the picker lists every
FFN, then every layer's stream, labelled as an SAE; a stream without a dictionary offers the background job;
with one (the app's one-site job, small settings, run here) the page draws its features, a feature's page
and steering, the site in the URL."""
from __future__ import annotations

import pytest

from support.feature_runs import needs_numbers, numbers_dictionaries, point_app_at
from support.app_support import array, chart, no_exception, open_app

PAGE = "webapp/pages/features.py"
TEXT = "three hundred and twenty one"
STREAM = "encoder.layers.1.resid"
pytestmark = needs_numbers


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs folder holding the app's one-site job's SAE of numbers-en-de's last encoder layer's stream."""
    root = tmp_path_factory.mktemp("runs")
    numbers_dictionaries(root, [STREAM])
    return root


@pytest.fixture
def env(runs, monkeypatch):
    point_app_at(monkeypatch, runs)
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
    assert "sparse autoencoder" in shown(at) and "Training one reads 200,000 residual-stream vectors" in shown(at)
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


def test_the_app_trains_a_stream_at_the_commands_steps_and_rows_and_a_transcoder_quicker():
    from explorer.studies.features.job import FeatureSettings
    from webapp.views.feature_sites import app_settings

    stream, ffn = app_settings(STREAM), app_settings("encoder.layers.1.ffn")
    assert (stream.steps, stream.rows) == (FeatureSettings.steps, FeatureSettings.rows)
    assert (ffn.steps, ffn.rows) == (1_000, 100_000)
    assert stream.held_rows == ffn.held_rows == 10_000
