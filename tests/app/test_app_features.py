"""AppTests of the Features page on the shipped numbers-en-de: without a dictionary it says so and offers the
background job; with one (the app's one-site job, small settings, run here) it draws the strongest features
at each position, a feature's training contexts, histogram and effects, and steers; the layer, feature,
value and positions live in the URL, and a hostile link falls back; a damaged dictionary is named in one
line with the job to train it again."""
from __future__ import annotations

import json

import pytest

from explorer.studies.features.job import dictionary_folder, site_result_path
from webapp.views.feature_sites import form_said
from support.feature_runs import SMALL, needs_numbers, numbers_dictionaries, point_app_at
from support.app_support import array, chart, no_exception, open_app

PAGE = "webapp/pages/features.py"
TEXT = "three hundred and twenty one"
SITES = ("encoder.layers.0.ffn", "decoder.layers.1.ffn")
pytestmark = needs_numbers


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs folder holding the app's one-site job's dictionaries of two sites of numbers-en-de."""
    root = tmp_path_factory.mktemp("runs")
    return root, numbers_dictionaries(root, SITES)


@pytest.fixture
def env(runs, monkeypatch):
    point_app_at(monkeypatch, runs[0])
    return runs


def shown(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "success", "subheader")
                    for e in at.get(kind))


def test_the_job_keeps_both_dictionaries_the_contexts_and_its_figures(runs):
    root, sha = runs
    for site in SITES:
        result = json.loads(site_result_path(sha, site, root / "features").read_text())
        assert result["settings"]["site"] == site and result["layer"]["site"] == site
        assert result["layer"]["rows"] == SMALL.rows and "fve_random" in result["layer"]
        for kind in ("trained", "random"):
            assert (dictionary_folder(sha, site, kind, root / "features") / "cfg.json").is_file()
        assert (dictionary_folder(sha, site, "trained", root / "features") / "contexts.safetensors").is_file()


def test_a_layer_without_a_dictionary_offers_the_background_job(env):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "enc2"})
    no_exception(at)
    assert "Encoder layer 2 has no dictionary yet" in shown(at)
    assert any(b.label == "Train Encoder layer 2's dictionary" for b in at.button)
    assert at.query_params["site"] == "enc2"


def test_the_page_draws_a_features_page_and_steers(env):
    at = open_app("numbers-en-de", PAGE, TEXT)
    no_exception(at)
    assert at.title[0].value == "Features"
    heat = next(t for t in chart(at, "features_positions")["data"] if t["type"] == "heatmap")
    values = array(heat["z"])                                                   # [shown, L]
    assert values.shape[0] == 5 and values.shape[1] == len(heat["x"]) >= 5
    assert (values[0] >= values[1]).all() and values[0].max() > 0
    assert "Held-out fraction of variance explained" in shown(at) and "random-decoder baseline" in shown(at)
    root, sha = env
    row = json.loads(site_result_path(sha, SITES[0], root / "features").read_text())["layer"]
    assert form_said(row) and form_said(row) in shown(at)              # which transcoder the job kept
    feature = at.selectbox(key="features_feature").value
    assert f"Feature #{feature} of Encoder layer 1" in shown(at)
    contexts = at.dataframe[0].value
    assert len(contexts) >= 1 and all("⟦" in c for c in contexts["context"])
    # the numbers' training data links no word (every German word too common): said, not an empty column
    assert "aligned target word" not in contexts and "aligned target word" not in at.dataframe[1].value
    assert "No aligned words: the training data links no word to another" in shown(at)
    assert list(contexts["activation"]) == sorted(contexts["activation"], reverse=True)
    assert chart(at, "features_histogram")["data"][0]["type"] == "bar"
    assert at.dataframe[1].value.shape[0] == len(contexts)                      # what it helps write, per context
    heads = array(next(t for t in chart(at, "features_heads")["data"] if t["type"] == "heatmap")["z"])
    assert heads.shape == (2, 4) and (heads >= 0).all() and heads.max() > 0   # 2 decoder layers x 4 heads
    # across the run's three shipped checkpoints (steps 150, 300, 900): the last, circled, is this one's,
    # whose mean is the mean of the contexts' activations in the table
    over = chart(at, "features_over_training")["data"]
    assert [str(x) for x in over[1]["x"]] == ["numbers-en-de-step150", "numbers-en-de-step300", "numbers-en-de"]
    assert over[2]["x"] == [over[1]["x"][-1]]
    assert abs(array(over[1]["y"])[-1] - contexts["activation"].mean()) <= 1e-3 * max(1.0, contexts["activation"].max())
    # steering: removed (0) where it fires by default; then set to its own strongest value elsewhere
    assert at.multiselect(key="features_at").value
    assert "With feature" in shown(at) and chart(at, "features_steer")["data"]
    at.number_input(key="features_value").set_value(7.5).run()
    no_exception(at)
    assert at.query_params["clamp"] == "7.5" and at.query_params["feature"] == str(feature)
    assert at.query_params["at"]


def lines(at, start: str) -> list[str]:
    return [str(m.value) for m in at.markdown if str(m.value).startswith(start)]


def test_steering_compares_greedy_with_greedy_whatever_the_page_decodes(env):
    """The steered sentence is decoded greedily, so its "Original" is the greedy translation too: under
    sampling the page's own translation differs, and that difference is not the feature's."""
    greedy = open_app("numbers-en-de", PAGE, TEXT, query={"feature": "1", "clamp": "0", "at": "1"})
    sampled = open_app("numbers-en-de", PAGE, TEXT, query={"feature": "1", "clamp": "0", "at": "1",
                                                            "dec": "sample", "temp": "2", "seed": "3"})
    for at in (greedy, sampled):
        no_exception(at)
    assert lines(sampled, "**Original:**") == lines(greedy, "**Original:**") != []
    assert lines(sampled, "**With feature") == lines(greedy, "**With feature")
    assert "Both translated greedily" not in shown(greedy)
    assert "Both translated greedily" in shown(sampled)


def test_positions_emptied_stay_empty_in_a_link(env):
    """Emptying the positions dropped `at` from the URL, and a fresh session from that link steered at the
    feature's firing positions, which the sharer had not asked for: the link keeps at=none."""
    at = open_app("numbers-en-de", PAGE, TEXT, query={"feature": "1", "clamp": "2", "at": "1"})
    no_exception(at)
    at.multiselect(key="features_at").set_value([]).run()
    no_exception(at)
    assert at.query_params["at"] == "none" and not lines(at, "**With feature")
    fresh = open_app("numbers-en-de", PAGE, TEXT, query=dict(at.query_params))
    no_exception(fresh)
    assert fresh.multiselect(key="features_at").value == [] and not lines(fresh, "**With feature")
    assert "Pick source positions above" in shown(fresh)


def test_a_feature_is_not_carried_to_another_layer_or_kept_unused(env):
    """feature=, clamp= and at= were kept in the URL of a layer with no dictionary, then applied to the next
    layer's dictionary picked; a feature picked on one layer was kept on another (where #127 is another
    feature): the new layer opens on its strongest, as a link to it does."""
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "enc2", "feature": "5", "clamp": "3", "at": "1,2"})
    no_exception(at)
    assert "has no dictionary yet" in shown(at)
    assert not {"feature", "clamp", "at"} & set(at.query_params) and at.query_params["site"] == "enc2"
    strongest = open_app("numbers-en-de", PAGE, TEXT, query={"site": "dec2"}).selectbox(key="features_feature").value
    first = open_app("numbers-en-de", PAGE, TEXT)
    options = first.selectbox(key="features_feature").options
    other = next(int(o.lstrip("#")) for o in options if int(o.lstrip("#")) != strongest)
    first.selectbox(key="features_feature").set_value(other).run()
    first.selectbox(key="features_site").set_value("decoder.layers.1.ffn").run()
    no_exception(first)
    assert first.selectbox(key="features_feature").value == strongest
    assert first.query_params["feature"] == str(strongest)


def test_a_decoder_layer_and_a_link_that_names_its_feature(env):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "dec2", "feature": "3", "clamp": "1.5", "at": "1,2"})
    no_exception(at)
    assert "at" not in at.query_params                          # no position picker on a decoder layer
    assert at.selectbox(key="features_site").value == "decoder.layers.1.ffn"
    assert at.selectbox(key="features_feature").value == 3
    assert at.number_input(key="features_value").value == 1.5
    assert "every target position" in shown(at)
    assert chart(at, "features_effects")["data"][0]["type"] == "bar"
    heat = next(t for t in chart(at, "features_positions")["data"] if t["type"] == "heatmap")
    assert any("→" in str(x) for x in heat["x"]) or heat["x"]


def test_a_hostile_link_falls_back_and_a_damaged_dictionary_is_named(env, tmp_path, monkeypatch):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"site": "<script>", "feature": "999999", "clamp": "nan",
                                                        "at": "x,,-3,99,\u00b2,2,2," + "9" * 5000})
    no_exception(at)
    assert at.selectbox(key="features_site").value == "encoder.layers.0.ffn"
    assert at.number_input(key="features_value").value == 0.0
    assert at.multiselect(key="features_at").value == [1] and at.query_params["at"] == "2"   # once, 1-based
    # a copy of the runs folder whose dictionary weights are cut short
    import shutil
    root, sha = env
    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    weights = dictionary_folder(sha, SITES[0], "trained", copy / "features") / "sae_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(copy))
    at = open_app("numbers-en-de", PAGE, TEXT)
    no_exception(at)
    warning = " ".join(str(w.value) for w in at.warning)
    assert "dictionary cannot be used" in warning and "damaged" in warning and "\n" not in warning
    assert any(b.label == "Train Encoder layer 1's dictionary" for b in at.button)


def test_figures_of_another_training_of_the_layer_are_not_shown_beside_its_dictionary(env, tmp_path, monkeypatch):
    """A training stopped after writing its dictionary and before its figures left the last training's
    figures beside the new dictionary (FVE 0.960 and "8 features active" shown for one of 0.943 and 4):
    figures are shown only when they name the dictionary loaded."""
    import shutil
    root, sha = env
    copy = tmp_path / "runs"
    shutil.copytree(root, copy)
    result = site_result_path(sha, SITES[0], copy / "features")
    figures = json.loads(result.read_text())
    figures["layer"]["dictionary_sha256"] = "0" * 64                     # the figures of another training
    result.write_text(json.dumps(figures))
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(copy))
    at = open_app("numbers-en-de", PAGE, TEXT)
    no_exception(at)
    assert "Held-out fraction of variance explained" not in shown(at)
    assert "held-out figures were not kept with it" in shown(at)
    assert at.selectbox(key="features_feature").value is not None      # the dictionary itself is used


@pytest.mark.parametrize("feature", ["5.5", "9" * 400, "-3", "1e3"])
def test_a_link_naming_no_feature_opens_the_strongest_not_a_nearest_one(env, feature):
    """feature=5.5 opened #25 (the nearest of those firing) and 400 digits added #1023 and showed #737:
    a feature id is a name, not an amount."""
    at = open_app("numbers-en-de", PAGE, TEXT)
    plain = at.selectbox(key="features_feature")
    strongest, offered = plain.value, plain.options                     # with no link: the first, the strongest
    at = open_app("numbers-en-de", PAGE, TEXT, query={"feature": feature})
    no_exception(at)
    box = at.selectbox(key="features_feature")
    assert box.value == strongest and box.options == offered           # nothing added to the choices
    assert at.query_params["feature"] == str(strongest)


def test_the_caption_says_which_transcoder_and_why():
    assert form_said({"skip": False}) == "A plain TopK transcoder (no linear skip). "
    said = form_said({"skip": True, "max_density_without_skip": 0.8412, "without_skip_steps": 1000})
    assert "with a linear skip" in said and "84.1% of tokens after 1,000 training steps" in said
    assert form_said({"skip": True}) == "A TopK transcoder with a linear skip. "        # trained with --skip always
    assert form_said({}) == ""                          # an SAE's row, or a transcoder's kept before the rule
