"""The Features page in a real browser (headless Chromium), with a small dictionary of the numbers model's
first encoder FFN trained here into the server's runs folder (the app's one-site job, small settings), as
a student's laptop and as a projector in presenter mode at 1024x768: the strongest features per position,
the feature's histogram and the steering figure draw (a mark of non-zero size, as test_figures_draw_browser.py
checks it), its training contexts are a table, no console error, no traceback on screen or in the server's
log (conftest); in presenter mode no text under webapp.presenter.MIN_PX and every figure full width. A
screenshot of each view goes to test-artifacts/browser/features/ for a person to look at.
"""
from __future__ import annotations

import pytest
import torch

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, timed
from test_figures_draw_browser import problems_on, watch_console
from test_presenter_browser import WINDOW, presenter_problems, shoot

SHOTS = ARTIFACTS / "features"
SITE_NAME = "encoder.layers.0.ffn"
FIGURES = {"features_positions", "features_histogram", "features_heads", "features_steer"}

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")


@pytest.fixture(scope="module")
def dictionary(runs_dir):
    """A small dictionary of one site in the server's runs folder, made as the page's job makes one."""
    from explorer.data import load_corpus
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.common.context import RunContext
    from explorer.studies.features.job import SITE, FeatureSettings, site_result_path

    torch.set_num_threads(1)
    ckpt = load_checkpoint(ROOT / "checkpoints" / NUMBERS)
    corpus = load_corpus("numbers")
    out = site_result_path(ckpt.meta["weights_sha256"], SITE_NAME, runs_dir / "features")
    SITE.to_file(out, ckpt.model, ckpt.tokenizer, corpus.train[:5000], corpus.dev,
                 FeatureSettings(width=64, k=4, steps=40, batch=256, rows=3000, held_rows=500), site=SITE_NAME,
                 root=runs_dir / "features",
                 context=RunContext(meta=ckpt.meta))
    return out


@pytest.mark.parametrize("present", [False, True], ids=["laptop", "presenter"])
def test_the_features_page_draws(visit, dictionary, present):
    page = visit.page
    if present:
        page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    mode = "presenter" if present else "laptop"
    with timed(f"features ({mode})"):
        page.goto(f"{visit.url}/features?ckpt={NUMBERS}&text=three+hundred+and+twenty+one"
                  + ("&present=1" if present else ""))
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        problems = problems_on(page, f"features ({mode})", errors, FIGURES)
    assert page.get_by_text("Where it fires most in the training pairs").count() == 1
    assert page.locator("[data-testid='stDataFrame']").count() >= 2          # the contexts, what it helps write
    if present:
        problems += presenter_problems(page, "features (presenter)")
    shoot(page, SHOTS, f"features_{mode}", sorted(FIGURES))
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()
