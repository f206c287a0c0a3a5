"""The Graphs page in a real browser (headless Chromium), with small dictionaries of every FFN of the numbers
model trained here into the server's runs folder (the app's one-site job, small settings): opened on a word
of the sentence, the page draws its graph by a background job, and the figure has marks of non-zero size
(as test_figures_draw_browser.py checks), no console error, no traceback (conftest); in presenter mode at
1024x768 no text under webapp.presenter.MIN_PX. Its link, opened in a fresh session as a colleague would,
shows the graph drawn from the kept file, with no new job. Screenshots go to test-artifacts/browser/graphs/.
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import torch

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, reopen_in_a_fresh_session, timed
from test_figures_draw_browser import problems_on, watch_console
from test_presenter_browser import WINDOW, presenter_problems, shoot

SHOTS = ARTIFACTS / "graphs"
FIGURE = ".st-key-graphs_figure [data-testid='stPlotlyChart']"
TEXT = "one hundred and ninety four"

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")


@pytest.fixture(scope="module")
def dictionaries(runs_dir):
    """Small dictionaries of every FFN in the server's runs folder, made as the page's job makes them."""
    from explorer.data import load_corpus
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.common.context import RunContext
    from explorer.studies.features.job import SITE, FeatureSettings, site_result_path
    from explorer.studies.features.sites import sites

    torch.set_num_threads(1)
    ckpt = load_checkpoint(ROOT / "checkpoints" / NUMBERS)
    corpus = load_corpus("numbers")
    for site in sites(ckpt.model):
        SITE.to_file(site_result_path(ckpt.meta["weights_sha256"], site, runs_dir / "features"), ckpt.model,
                     ckpt.tokenizer, corpus.train[:5000], corpus.dev,
                     FeatureSettings(width=64, k=4, steps=40, batch=256, rows=3000, held_rows=500), site=site,
                     root=runs_dir / "features", context=RunContext(meta=ckpt.meta))
    return runs_dir / "features"


@pytest.mark.parametrize("present", [False, True], ids=["laptop", "presenter"])
def test_the_graphs_page_draws_and_its_link_reopens_drawn(visit, context, dictionaries, present):
    page = visit.page
    if present:
        page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    mode = "presenter" if present else "laptop"
    word = "3" if present else "4"
    with timed(f"graphs ({mode}): the job, then the figure"):
        page.goto(f"{visit.url}/graphs?ckpt={NUMBERS}&text={TEXT.replace(' ', '+')}&word={word}"
                  + ("&present=1" if present else ""))
        page.wait_for_selector("h1", timeout=LONG)
        page.wait_for_selector(FIGURE, timeout=LONG)                   # drawn once the background job ended
        idle(page)
        problems = problems_on(page, f"graphs ({mode})", errors, {"graphs_figure"})
    assert page.get_by_text("Replacement score").count() == 1
    assert page.get_by_text("Open feature #").count() == 1                   # the picked node's Features link
    if present:
        problems += presenter_problems(page, "graphs (presenter)")
    shoot(page, SHOTS, f"graphs_{mode}", ["graphs_figure"])
    assert not problems, "\n".join(problems)
    link = page.url
    assert parse_qs(urlsplit(link).query)["word"] == [word]
    query = reopen_in_a_fresh_session(context, link, FIGURE, absent=("button:has-text('Draw the graph again')",
                                                                           "text=Drawing the graph in the background"))
    assert query["word"] == word and query["text"] == TEXT
    visit.assert_offline_and_quiet()
