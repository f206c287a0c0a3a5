"""AppTest: text that comes from files is shown as text on every page, never run as Markdown or HTML.

Why: a model's files (config.json, card.json, the tokenizer_config.json and README an import reads),
a run's folder name and status files, an uploaded gold file's name and words are written by whoever
made them, and the app shows them to every student. Streamlit renders captions, alerts, headings,
widget labels, radio and select-slider options, tabs and st.table cells as Markdown (with images,
links, LaTeX, :color[...] and emoji shortcodes); plotly renders HTML in titles and labels. An
imported model whose source_lang is `![x](http://host/p.png)` made every page load that address.

Each hostile value below holds an image, a link, HTML tags, a colour directive, LaTeX and an emoji
shortcode. Wherever it is shown through Markdown it must come escaped (webapp.text_safety.md_escape:
no character of it left active); where Streamlit shows plain text (selectbox options, dataframes)
it must come unchanged; in a plotly figure it must come HTML-escaped.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import torch

from explorer.store.checkpoint import read_card
from support.app_support import ROOT, AppTest, no_exception
from support.marian_helpers import random_marian
from support.training_fixtures import train_records, write_run
from support.waiting import STALL_S
from webapp import state
from webapp.text_safety import md_escape

TIMEOUT = STALL_S                   # per script run: a hang guard, never a timing goal
EVIL = "![i](http://127.0.0.1:8899/p.png) [l](http://127.0.0.1:8899/) <b>b</b><img src=x> :red[r] $x$ :smile:"
MODEL = "evil![i](x.png)<b>:red[r]$x$:smile:"                 # a folder name: no "/"
RUN = "run![i](x.png)<b>:red[r]$x$:smile:"
GOLD = "gold![i](x.png) <img src=x> :red[r] $x$ :smile:.align"
CARD_FIELDS = ("source", "license", "domain", "data", "tool", "fine_tuned_from")
MARKDOWN = ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader")
LABELLED = ("selectbox", "multiselect", "radio", "select_slider", "text_area", "text_input", "number_input",
            "slider", "checkbox", "toggle", "button", "file_uploader", "expander", "tab")
PUNCTUATION = r"!-/:-@\[-`{-~"


def value(field: str) -> str:
    return f"{field} {EVIL}"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(models folder, runs folder): a model imported from a Marian directory whose README holds hostile
    text, its config.json's languages and its card's other fields made hostile too; a run with a hostile name,
    error and dev samples."""
    root = tmp_path_factory.mktemp("escaping")
    hf, models, runs = root / "hf", root / "models", root / "runs"
    random_marian(hf)
    (hf / "README.md").write_text(f"---\nlicense: {value('license')}\ndatasets: {value('domain')}\n---\n")
    from explorer.interop.hf_import import import_marian
    path = import_marian(str(hf), models / MODEL, dtype=torch.float32, src_lang="es", tgt_lang="en")
    # the import refuses such codes in tokenizer_config.json now; a checkpoint's config.json can still say anything
    config = json.loads((path / "config.json").read_text())
    config.update(src_lang=value("src"), tgt_lang=value("tgt"))
    (path / "config.json").write_text(json.dumps(config))
    card = read_card(path)
    card["model_card"].update({field: value(field) for field in CARD_FIELDS})
    (path / "card.json").write_text(json.dumps(card))
    run = write_run(runs / RUN, {"state": "failed", "pid": 1, "step": 2, "total_steps": 4, "started": time.time(),
                                 "last_error": value("error")},
                    train_records([1, 2]) + [{"kind": "eval", "step": 2, "bleu": 1.0, "chrf": 2.0,
                                              "samples": [{"src": value("src"), "ref": value("ref"),
                                                           "hyp": value("hyp")}]}])
    assert run.name == RUN
    return models, runs


@pytest.fixture
def app_env(folders, monkeypatch):
    models, runs = folders
    monkeypatch.delenv(state.ROOTS_ENV, raising=False)
    monkeypatch.setenv(state.MODELS_ENV, str(models))
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(runs))
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    state.refresh_checkpoints()
    yield models, runs
    state.refresh_checkpoints()


def open_page(page: str | None = None, session: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["ckpt"] = MODEL
    at.session_state["text"] = "la casa es grande"
    for key, val in (session or {}).items():
        at.session_state[key] = val
    at.run()
    no_exception(at)
    assert Path(at.session_state["checkpoint_path"]).name == MODEL
    if page:
        at.switch_page(f"webapp/pages/{page}.py").run()
        no_exception(at)
    return at


def read_escapes(markdown: str) -> str:
    """The text a Markdown renderer hands on once it has read the backslash escapes (where Streamlit
    then looks for :emoji: and :material/icon: shortcodes)."""
    return re.sub(rf"\\([{PUNCTUATION}])", r"\1", markdown)


def markdown_shown(at: AppTest) -> list[str]:
    """Every text of the page that Streamlit renders as Markdown."""
    found = [str(e.value) for kind in MARKDOWN for e in at.get(kind)]
    for kind in LABELLED:
        for widget in at.get(kind):
            found.append(str(getattr(widget, "label", "") or ""))
            if kind in ("radio", "select_slider"):
                found += [str(o) for o in widget.options]
    for table in at.get("table"):
        found += [str(cell) for cell in table.value.to_numpy().ravel()]
    return found


def assert_inert(at: AppTest, *expected: str) -> None:
    """Hostile text shown through Markdown only escaped; each of `expected` shown, escaped."""
    shown = markdown_shown(at)
    hostile = [s for s in shown if "8899" in s or "x.png" in s]
    for body in hostile:
        active = re.sub(rf"\\[{PUNCTUATION}]", "", body)          # what is left once escaped characters go
        for part in ("![", "](", "<", "$", ":red["):
            assert part not in active, (part, body)
        assert not re.search(r":[A-Za-z0-9_+-]", active), body                # no :name[...] directive
        assert not re.search(r":[\w+-]+:", read_escapes(body)), body           # no shortcode in the text
    for text in expected:
        assert any(md_escape(text) in s for s in shown), (text, hostile)


def assert_figures_escaped(at: AppTest) -> None:
    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, list):
            for v in node:
                yield from strings(v)
    for chart in at.get("plotly_chart"):
        for s in strings(json.loads(chart.proto.spec)):
            if "8899" in s or "x.png" in s:                                 # hostile text: no tag left
                assert "<" not in s and "&lt;" in s, s


def test_sidebar_card_and_translate_page_show_the_models_files_as_text(app_env):
    at = open_page()
    assert_inert(at, value("src"), value("tgt"), *(value(f) for f in CARD_FIELDS))
    picker = at.sidebar.selectbox(key="ckpt_pick")                          # plain text: shown unchanged
    assert any(value("src") in option and "\\" not in option for option in picker.options)
    assert_figures_escaped(at)


@pytest.mark.parametrize("page", ["positions", "checkpoints", "architecture"])
def test_pages_naming_the_model_show_its_name_as_text(app_env, page):
    at = open_page(page)
    assert_inert(at, *((MODEL,) if page == "positions" else ()))
    assert_figures_escaped(at)


def test_an_uploaded_gold_files_name_and_words_are_shown_as_text(app_env):
    at = open_page("alignment")
    gold = "casa ![a](b) <i>x</i> ||| house :red[c] $d$ ||| 0-0 1-1\n".encode()
    at.file_uploader(key="align_upload").set_value((GOLD, gold, "text/plain")).run()
    no_exception(at)
    assert_inert(at, GOLD)
    assert_figures_escaped(at)
    bad = "only one field\n".encode()
    at.file_uploader(key="align_upload").set_value((GOLD, bad, "text/plain")).run()
    no_exception(at)
    assert_inert(at, GOLD)


def test_a_runs_name_status_and_samples_are_shown_as_text(app_env):
    at = open_page("train", session={"tr_pick": RUN})
    assert_inert(at, RUN, value("error"), value("src"), value("ref"), value("hyp"))
    assert_figures_escaped(at)
    at.switch_page("webapp/pages/schedule.py").run()
    no_exception(at)
    assert_inert(at)
    assert_figures_escaped(at)


def test_the_names_of_a_runs_checkpoints_on_the_contributions_button_are_shown_as_text(folders, monkeypatch,
                                                                                       tmp_path):
    """The 'Measure the mean source share at each checkpoint' button named every checkpoint of the run
    unescaped: a name `![n](http://host/p.png)` made each browser that opened the page fetch it."""
    import shutil
    models = tmp_path / "models"
    names = []
    for step in (1, 2):
        folder = shutil.copytree(folders[0] / MODEL, models / f"{MODEL}-{step}")
        config = json.loads((folder / "config.json").read_text())
        config["name"] = f"step{step} {EVIL}"
        config["training"] = {"run": "r", "step": step}
        (folder / "config.json").write_text(json.dumps(config))
        names.append(config["name"])
    monkeypatch.delenv(state.ROOTS_ENV, raising=False)
    monkeypatch.setenv(state.MODELS_ENV, str(models))
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(folders[1]))
    monkeypatch.setenv("EXPLORER_DEVICE", "cpu")
    state.refresh_checkpoints()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
        at.query_params["ckpt"] = names[1]
        at.session_state["text"] = "la casa es grande"
        at.run()
        no_exception(at)
        at.switch_page("webapp/pages/contributions.py").run()
        no_exception(at)
        button = at.button(key="contrib_curve_button")
        assert all(md_escape(n) in button.label for n in names), button.label
        assert_inert(at)
    finally:
        state.refresh_checkpoints()
