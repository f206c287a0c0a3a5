"""An imported multilingual model in a real browser: a tiny random NLLB model (tests/support/m2m100_helpers),
imported with its language pair, opened by link and walked through every page of the page table from the
sidebar, as test_app_browser walks the numbers model. The AppTests (tests/app/test_app_m2m100.py) run every
page's script on such a model but never draw: here every figure must draw, with no traceback, no console
error, and the checkpoint and its pair kept across pages. The Alignment page has no gold links for this
pair, so it draws no chart and says so."""
from __future__ import annotations

import pytest

from browser_support import ARTIFACTS, no_exception, open_app, sidebar_to, squash
from test_figures_draw_browser import problems_on, watch_console
from webapp import lecture

MODEL = "nllb-tiny-browser"
TEXT = "la casa es grande"
PAIR = ("spa_Latn", "eng_Latn")


@pytest.fixture(scope="module")
def nllb(more_checkpoints, tmp_path_factory):
    """The imported model in the folder the server lists (removed after, so other tests' lists stay theirs)."""
    pytest.importorskip("transformers")
    import shutil

    import torch

    from explorer.interop.hf_import import import_m2m100
    from support.m2m100_helpers import random_m2m100

    hf = tmp_path_factory.mktemp("m2m100-browser") / "hf"
    random_m2m100(hf, kind="nllb", d_model=48, heads=6, ffn=96, layers=3, seed=1)
    path = import_m2m100(str(hf), more_checkpoints / MODEL, dtype=torch.float32, src_lang=PAIR[0], tgt_lang=PAIR[1])
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pair_shown(page) -> bool:
    """Whether the sidebar's language pickers show the imported pair."""
    sidebar = squash(page.locator("[data-testid='stSidebar']").inner_text())
    return all(code in sidebar for code in PAIR)


def test_every_page_draws_on_an_imported_nllb_model(visit, nllb):
    page = open_app(visit, ckpt=MODEL, text=TEXT)
    errors = watch_console(page)
    assert pair_shown(page), f"the sidebar's pickers do not show the imported pair {PAIR}"
    problems = []
    for entry in [*lecture.PAGES_TABLE[1:], lecture.PAGES_TABLE[0]]:
        errors.clear()
        sidebar_to(page, entry.title)
        no_exception(page)
        assert f"ckpt={MODEL}" in page.url, f"{entry.title}: the checkpoint was not kept"
        assert pair_shown(page), f"{entry.title}: the language pair was not kept"
        page.screenshot(path=str(ARTIFACTS / f"nllb_page_{entry.url_path}.png"))
        expected = None                       # test_figures_draw_browser's charts for the page
        if entry.url_path == "alignment":     # no gold links ship for this pair: the page asks for a file
            assert "no gold alignments ship" in squash(page.locator("[data-testid='stMain']").inner_text())
            expected = set()
        problems += problems_on(page, entry.url_path, errors, expected)
    assert not problems, "figures that did not draw, or errors:\n" + "\n".join(problems)
    visit.assert_offline_and_quiet()
