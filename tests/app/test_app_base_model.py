"""AppTest of every page on a model the size of the paper's base Transformer (and of OPUS-MT).

The shipped models have 4 heads and 3+3 layers; an imported Marian model has 8 heads, 6+6 layers
(48 heads of each attention kind), d_model 512 and a 58k vocabulary. Every page must run on it
without an exception or an error message, the Attention page's all-heads grids must hold all 48
heads of each kind, and switching head or beam step must keep working. The checkpoint has random
weights (tests/support/base_model.py): the pages' job is to show whatever the model does.
"""
from __future__ import annotations

import re

import pytest

from support.app_support import ROOT, chart, no_exception, open_app, texts
from support.base_model import NAME, SENTENCE, base_models_dir  # noqa: F401  (a session fixture)
from webapp import state

PAGES = re.findall(r'st\.Page\("(webapp/pages/\w+\.py)"', (ROOT / "app.py").read_text())
ATTENTION = "webapp/pages/attention.py"
BEAM = "webapp/pages/beam.py"


@pytest.fixture(autouse=True)
def only_the_base_model(base_models_dir, tmp_path, monkeypatch):  # noqa: F811
    """The app lists only the base-size checkpoint; training runs go to a temporary folder."""
    monkeypatch.setenv(state.ROOTS_ENV, str(base_models_dir))
    monkeypatch.delenv(state.MODELS_ENV, raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    state.refresh_checkpoints()
    yield
    state.refresh_checkpoints()


def clean(at) -> None:
    """No exception, and no error message: a page that runs but says it failed does not count."""
    no_exception(at)
    assert not at.error, texts(at.error)


def test_the_pages_list_is_read_from_the_app():
    assert ATTENTION in PAGES and BEAM in PAGES and len(PAGES) >= 7, PAGES


@pytest.mark.parametrize("page", PAGES, ids=[p.rsplit("/", 1)[-1][:-3] for p in PAGES])
def test_every_page_runs_on_a_base_size_model(page):
    at = open_app(NAME, page, text=SENTENCE)
    clean(at)
    assert at.session_state["checkpoint_path"].endswith(NAME)
    card = texts(next(e for e in at.sidebar.expander if e.label == "Model card").caption)
    assert "the paper's base model" in card.replace("\\", ""), card


def test_the_all_heads_grid_holds_48_heads_of_each_kind():
    at = open_app(NAME, ATTENTION, text=SENTENCE)
    clean(at)
    for kind in ("encoder", "decoder", "cross"):
        at.radio(key="attn_kind").set_value(kind).run()
        clean(at)
        grid = chart(at, "attn_grid")
        assert len(grid["data"]) == 6 * 8, kind
        titles = {a["text"] for a in grid["layout"]["annotations"]}
        assert {"L1 H1", "L6 H8"} <= titles
    at.radio(key="attn_head").set_value(8).run()
    at.radio(key="attn_layer").set_value(6).run()
    clean(at)
    assert "Layer 6, head 8" in chart(at, "attn_zoom")["layout"]["title"]["text"]


@pytest.mark.parametrize("tab", ["Head summary", "Word alignment", "Output vs reference", "bertviz"])
def test_every_attention_tab_runs_at_48_heads(tab):
    at = open_app(NAME, ATTENTION, text=SENTENCE)
    at.session_state["view"] = tab
    at.run()
    clean(at)
    if tab == "bertviz":
        at.toggle(key="bertviz_on").set_value(True).run()
        clean(at)
        assert not at.warning, texts(at.warning)                       # not refused as too large
        frames = at.get("iframe") or at.get("components_html") or at.get("html")
        assert len(list(frames)) == 2


def test_ablating_heads_at_48_heads():
    at = open_app(NAME, ATTENTION, text=SENTENCE)
    at.session_state["view"] = "Head ablation"
    at.run()
    at.multiselect(key="ablate_pick").set_value([("cross", 5, 7), ("encoder", 0, 0)]).run()
    clean(at)
    assert chart(at, "ablation_diff")


def test_stepping_the_beam_on_a_base_size_model():
    at = open_app(NAME, BEAM, text=SENTENCE)
    clean(at)
    assert chart(at, "beam_tree")["data"]
    steps = at.slider(key="beam_step")
    for step in (2, int(steps.max), 1):
        at.slider(key="beam_step").set_value(step).run()
        clean(at)
        assert f"Candidates ranked at step {step}" in texts(at.subheader)
        assert chart(at, "beam_attn_step")["data"]
