"""The offline bertviz documents: no URL, tokens escaped, weights rounded, size limited, scripts read
from the installed packages (bertviz, mpld3's d3 5.7.0, xstatic-jquery's jQuery 3.7.1), a set-up
message when one is missing; tests/browser/test_bertviz_browser.py draws them in Chromium."""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
from pathlib import Path

import numpy as np
import pytest

from support.bertviz_inputs import HOSTILE, TGT, stacks
from webapp import bertviz_offline as bv

ROOT = Path(__file__).resolve().parents[2]
# asset -> (distribution, the file as its RECORD names it)
INSTALLED = {"head_view.js": ("bertviz", "bertviz/head_view.js"),
             "model_view.js": ("bertviz", "bertviz/model_view.js"),
             "d3": ("mpld3", "mpld3/js/d3.v5.min.js"),
             "jquery": ("xstatic-jquery", "xstatic/pkg/jquery/data/jquery.slim.min.js")}


def params_of(html: str) -> dict:
    match = re.search(r"const params = (\{.*?\});", html)
    assert match, "no params in the document"
    return json.loads(match.group(1))


@pytest.mark.parametrize("view", ["head", "model"])
def test_document_is_self_contained(view):
    html, note = bv.render(view, stacks(), HOSTILE, TGT, layer=1)
    assert note == ""
    assert not re.search(r"https?://", html)
    assert "cdnjs" not in html and "require.config" not in html
    assert "d3js.org v5.7.0" in html and "jQuery v3.7.1" in html           # libraries inlined
    assert "default-src 'none'" in html                                     # and nothing may be fetched


def test_scripts_are_the_installed_packages_files():
    """Each script is a file of the distribution pip installed (per its RECORD), inlined unchanged
    but for the URL rewriting; nothing of the kind is kept in this repository."""
    html, _ = bv.render("head", stacks(), HOSTILE, TGT)
    model_html, _ = bv.render("model", stacks(), HOSTILE, TGT)
    for name, (dist_name, record_path) in INSTALLED.items():
        dist = importlib.metadata.distribution(dist_name)
        assert record_path in {str(f) for f in dist.files}
        path = Path(dist.locate_file(record_path)).resolve()
        assert bv.asset_path(name).resolve() == path
        text = path.read_text(encoding="utf-8")
        if name in bv.VIEWS.values():
            body = text[text.index("requirejs(["):].split("PYTHON_PARAMS")[-1]
            assert bv._no_urls(body) in (html if name == "head_view.js" else model_html)
        else:
            assert bv._no_urls(text) in html
    assert not (ROOT / "explorer" / "ui" / "static").exists()
    assert not [p for p in (ROOT / "explorer").rglob("*.js")]


def test_versions_are_the_expected_ones():
    assert bv.versions() == {"d3": "5.7.0", "jquery": "3.7.1"}
    assert importlib.metadata.version("mpld3") == "0.5.12"
    assert importlib.metadata.version("xstatic-jquery").startswith("3.7.1")
    assert importlib.metadata.version("bertviz").startswith("1.4")


@pytest.fixture
def fresh_assets(monkeypatch):
    """Asset entries may be changed in the test; the cached file texts are dropped before and after."""
    def clear():
        bv._asset.cache_clear()
        bv._libraries.cache_clear()
    clear()
    yield lambda name, **changes: monkeypatch.setitem(bv.ASSETS, name,
                                                      dataclasses.replace(bv.ASSETS[name], **changes))
    monkeypatch.undo()
    clear()


@pytest.mark.parametrize("name, changes, says", [
    ("d3", {"module": "no_such_package_for_d3"}, "mpld3, which is not installed"),
    ("jquery", {"module": "no_such_namespace.pkg.jquery"}, "xstatic-jquery, which is not installed"),
    ("model_view.js", {"path": "no_such_view.js"}, "not found in the installed package bertviz"),
    ("d3", {"path": "js/d3.v3.min.js"}, "bertviz's views need d3 v5"),
    ("head_view.js", {"path": "__init__.py"}, "not the bertviz 1.4 script"),
])
def test_a_missing_piece_names_the_setup_command(fresh_assets, name, changes, says):
    fresh_assets(name, **changes)
    for view in ("head", "model"):
        if name in bv.VIEWS.values() and bv.VIEWS[view] != name:
            assert bv.render(view, stacks(), HOSTILE, TGT)[0]                # the other view still renders
            continue
        with pytest.raises(bv.AssetMissing) as caught:
            bv.render(view, stacks(), HOSTILE, TGT)
        assert isinstance(caught.value, OSError)                            # what the page reports
        assert says in str(caught.value) and "make setup" in str(caught.value)
        assert "pip install -e ." in str(caught.value)


def test_a_piece_installed_later_is_found(fresh_assets):
    """A failure is not cached: once the package is there the views build, with no restart."""
    fresh_assets("d3", module="no_such_package_for_d3")
    with pytest.raises(bv.AssetMissing):
        bv.render("head", stacks(), HOSTILE, TGT)
    bv.ASSETS["d3"] = dataclasses.replace(bv.ASSETS["d3"], module="mpld3")
    assert "d3js.org v5.7.0" in bv.render("head", stacks(), HOSTILE, TGT)[0]


@pytest.mark.parametrize("view", ["head", "model"])
def test_tokens_cannot_break_out_of_the_script(view):
    html, _ = bv.render(view, stacks(), HOSTILE, TGT)
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 3                                               # libraries, shim, view: no more
    assert "<img" not in html and "window.PWNED=2</script>" not in html
    params = params_of(html)
    data = {d["name"]: d for d in params["attention"]}
    assert data["Encoder"]["left_text"][:2] == HOSTILE[:2]                  # the same strings, safely encoded
    assert data["Cross"]["left_text"][1] == ' "quoted"' and data["Cross"]["right_text"] == bv.pretty_tokens(HOSTILE)


def test_weights_rounded_to_three_decimals():
    s = stacks()
    html, _ = bv.render("head", s, HOSTILE, TGT)
    enc = np.asarray(params_of(html)["attention"][0]["attn"])
    assert enc.shape == s["encoder"].shape
    assert np.allclose(enc, np.round(s["encoder"].astype(np.float64), 3))
    assert not re.search(r"\d\.\d{4,}", params_of_text(html))              # no float32 noise


def params_of_text(html: str) -> str:
    return re.search(r"const params = (\{.*?\});", html).group(1)


def test_opens_on_the_chosen_layer_and_kind():
    html, _ = bv.render("head", stacks(), HOSTILE, TGT, layer=1, kind="cross")
    params = params_of(html)
    assert params["layer"] == 2 and params["default_filter"] == "2"            # layer index 1, labelled 2
    assert '<option value="2" selected>Cross</option>' in html


def test_size_limit_falls_back_to_one_layer_then_refuses():
    s = stacks(layers=3, heads=2)
    per_layer = sum(int(np.prod(a.shape[1:])) for a in s.values())
    layers, note = bv.choose_layers(s, layer=2, max_values=per_layer * 3)
    assert layers == [0, 1, 2] and note == ""
    layers, note = bv.choose_layers(s, layer=2, max_values=per_layer * 2)
    assert layers == [2] and "layer 3 only" in note
    html, note = bv.render("model", s, HOSTILE, TGT, layer=2, max_values=per_layer * 2)
    assert len(params_of(html)["attention"][0]["attn"]) == 1 and note
    with pytest.raises(bv.ViewTooLarge):
        bv.render("head", s, HOSTILE, TGT, max_values=per_layer - 1)


def test_mismatched_tokens_and_bad_view_raise():
    with pytest.raises(ValueError):
        bv.render("head", stacks(), HOSTILE[:-1], TGT)
    with pytest.raises(ValueError):
        bv.render("neuron", stacks(), HOSTILE, TGT)
    assert bv.height("head", stacks()) > 100 and bv.height("model", stacks()) > 100


def test_safe_json_round_trips():
    value = {"t": ["</script>", "<!--", "a&b", "\u2028"]}
    text = bv.safe_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value


def test_the_tab_names_the_setup_command_and_other_views_work(fresh_assets):
    """AppTest (the script runs in this process, so the changed entry applies): with d3's package
    missing, the bertviz tab shows the message instead of frames, and the Heads tab still draws."""
    from support.app_support import has_chart, no_exception, open_app, texts, usable_checkpoint_or_skip

    info, text = usable_checkpoint_or_skip()
    fresh_assets("d3", module="no_such_package_for_d3")
    at = open_app(info.name, "webapp/pages/attention.py", text=text)
    at.session_state["view"] = "bertviz"
    at.run()
    at.toggle(key="bertviz_on").set_value(True).run()
    no_exception(at)
    assert not at.get("iframe")
    assert "mpld3" in texts(at.error) and "make setup" in texts(at.error)
    at.session_state["view"] = "Heads"
    at.run()
    no_exception(at)
    assert has_chart(at, "attn_zoom")
