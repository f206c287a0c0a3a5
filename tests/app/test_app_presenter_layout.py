"""AppTests of presenter mode's projector layout, on the shipped numbers model: what the script sends, quickly
and without a browser (tests/browser/test_presenter_browser.py measures the same pages' boxes at 1024x768).

- Each page that puts its result first (webapp.presenter.areas) draws it before its Learn panel in presenter
  mode and after it otherwise: the Attention page's all-heads grid, the Layers page's DecoderLens table,
  the Causes page's offer to patch (where its grids come), the Training vs inference page's teacher-forced
  run, the Alignment page's links, the Train page's planned learning rate, the Checkpoints page's table.
- The tables a projector shows (webapp.presenter.table_columns) name the columns they keep, each with a
  width, all together within webapp.presenter.TABLE_PX; on a laptop every column is there, sized to its text.
- The Attention page's causal-mask switch is left out of presenter mode where it does nothing (encoder and
  cross-attention), and its kind's label, which repeats the page's title, is collapsed there.
"""
from __future__ import annotations

import json

import pytest

from support.app_support import ROOT, no_exception, open_app, runs
from webapp import presenter

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
TEXT = "three hundred and twenty one"
pytestmark = [pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de"),
              pytest.mark.usefixtures(runs.__name__)]      # the shipped checkpoints, a temporary runs folder


def keyed(key: str):
    return lambda node: key in str(getattr(getattr(node, "proto", None), "id", ""))


def of_type(kind: str):
    return lambda node: getattr(node, "type", None) == kind


def learn_panel(node) -> bool:
    return getattr(node, "type", None) == "expander" and str(getattr(node, "label", "")).startswith("Learn")


# The page's result, by how the script's output shows it.
RESULTS = {
    "attention": keyed("attn_grid"),
    "layers": of_type("dataframe"),
    "causes": keyed("causes_start"),
    "training_vs_inference": keyed("tvi_forced_rows"),
    "alignment": keyed("align_links"),
    "train": keyed("tr_planned"),
    "checkpoints": of_type("dataframe"),
}


def in_order(at) -> list:
    """Every element of the page's main area, in the order the page shows them."""
    out = []

    def walk(node) -> None:
        for child in getattr(node, "children", {}).values():
            out.append(child)
            walk(child)
    walk(at.main)
    return out


def first(nodes: list, match) -> int:
    found = [i for i, node in enumerate(nodes) if match(node)]
    assert found, "not on the page"
    return found[0]


def open_page(page: str, present: bool, **query):
    at = open_app("numbers-en-de", f"webapp/pages/{page}.py", TEXT, query={**({"present": "1"} if present else {}), **query})
    no_exception(at)
    return at


@pytest.mark.parametrize("page", sorted(RESULTS))
def test_presenter_mode_puts_the_result_before_the_learn_panel(page):
    for present in (True, False):
        nodes = in_order(open_page(page, present))
        result, learn = first(nodes, RESULTS[page]), first(nodes, learn_panel)
        assert (result < learn) is present, f"{page} ({'presenter' if present else 'laptop'}): the result is element " \
                                            f"{result}, the Learn panel {learn}"


def widths(table) -> dict[str, int]:
    config = json.loads(table.proto.columns or "{}")
    return {name: c["width"] for name, c in config.items() if isinstance(c, dict) and c.get("width")}


@pytest.mark.parametrize("page, kept", [
    ("layers", ["the decoder reads", "translation", "log-prob", "as the model's"]),
    ("checkpoints", ["checkpoint", "step", "data", "preset", "dev BLEU", "test BLEU"]),
    ("training_vs_inference", ["position", "forced: reads", "forced: token", "forced: log p", "model's pick", "agrees",
                               "step: reads (so far)", "step: writes", "step: log p"])])
def test_presenter_mode_fits_the_tables_to_the_width(page, kept):
    table = open_page(page, True).dataframe[0]
    assert list(table.proto.column_order) == kept
    shown = widths(table)
    assert sorted(shown) == sorted(kept) and sum(shown.values()) <= presenter.TABLE_PX, shown
    laptop = open_page(page, False).dataframe[0]
    assert not laptop.proto.column_order and not widths(laptop)              # every column, sized to its text
    assert set(kept) <= set(laptop.value.columns)


def test_presenter_mode_wraps_the_decoderlens_translations_in_rows_tall_enough():
    """A layer's translation (the embeddings' often runs to the length limit) was cut inside its 520 px cell on a
    1024 px projector, the rest of it unreadable: its rows are now as tall as the longest translation needs."""
    long = "nine hundred and ninety nine thousand nine hundred and ninety nine"
    at = open_app("numbers-en-de", "webapp/pages/layers.py", long, query={"present": "1"})
    no_exception(at)
    table = at.dataframe[0]
    longest = max(len(t) for t in table.value["translation"])
    width = widths(table)["translation"]
    lines = -(-longest // int((width - presenter.CELL_PAD_PX) / presenter.CHAR_PX))
    assert lines > 1, f"the test needs a translation longer than a line: {longest} characters in {width} px"
    assert table.proto.row_height >= min(lines, presenter.WRAP_LINES) * presenter.LINE_PX
    laptop = open_app("numbers-en-de", "webapp/pages/layers.py", long)
    assert not laptop.dataframe[0].proto.row_height                          # one line a row, sized to its text
    short = open_page("layers", True).dataframe[0]
    assert not short.proto.row_height or max(len(t) for t in short.value["translation"]) * presenter.CHAR_PX > width


def test_wrapped_lines_count_as_the_table_wraps_at_spaces_and_wide_characters_twice():
    width = presenter.CELL_PAD_PX + int(20 * presenter.CHAR_PX) + 1               # 20 characters a line
    assert presenter.wrapped_lines(["a" * 20], width) == 1
    assert presenter.wrapped_lines(["aaaaaaaaaaaaaaa bbbbbbbbbbbbbbb ccccc"], width) == 3   # 37 characters, 3 lines
    assert presenter.wrapped_lines(["漢" * 20], width) == 2                          # each as wide as two
    assert presenter.wrapped_lines(["x " * 500], width) == presenter.WRAP_LINES and presenter.wrapped_lines([], width) == 1


def test_the_attention_pages_controls_on_a_projector():
    cross = open_page("attention", True)
    assert not [t for t in cross.toggle if t.key == "attn_mask"]                # it does nothing here
    assert cross.radio(key="attn_kind").proto.label_visibility.value == 2       # collapsed: the title says it
    decoder = open_page("attention", True, kind="decoder")
    assert [t for t in decoder.toggle if t.key == "attn_mask"]
    laptop = open_page("attention", False)
    mask = [t for t in laptop.toggle if t.key == "attn_mask"]
    assert mask and mask[0].proto.disabled                                       # greyed out beside the others


def axes_tick_sizes(at) -> list:
    """Each chart's axes' tick sizes as the script sends them (None: left to the theme)."""
    sizes = []
    for chart in at.get("plotly_chart"):
        layout = json.loads(chart.proto.spec)["layout"]
        axes = [v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))]
        sizes += [(ax.get("tickfont") or {}).get("size") for ax in axes]
    return sizes


@pytest.mark.parametrize("page", ["attention", "layers"])
def test_presenter_charts_state_their_text_sizes(page):
    """A chart the browser draws before presenter mode's style sheet applies would take the laptop's 12 px
    ticks from the theme: in presenter mode every axis's ticks are stated, at least MIN_PX."""
    shown = axes_tick_sizes(open_page(page, True))
    assert shown and all(isinstance(s, (int, float)) and s >= presenter.MIN_PX for s in shown), shown
    assert None in axes_tick_sizes(open_page(page, False))                       # on a laptop: the theme's


def test_the_presenter_toggle_is_sent_on_every_run():
    """A link's presenter mode reaches the browser on every run, not only the first: a browser that missed
    the first (a page switched to at once) would show the toggle's default, off, and send that back."""
    at = open_page("layers", True)
    at.run()                                                     # a run that changed nothing
    toggle = at.sidebar.toggle(key=presenter.KEY)
    assert toggle.value is True and toggle.proto.set_value
