"""The Contributions page in a real browser (headless Chromium), as a student's laptop and as a projector
in presenter mode at 1024x768: every figure draws (a mark of non-zero size, as test_figures_draw_browser.py
checks it), the curve over training behind its button too; no console error, no traceback on screen or in
the server's log (conftest); in presenter mode no text under webapp.presenter.MIN_PX and every figure full
width (test_presenter_browser.py's measures). A screenshot of each view goes to
test-artifacts/browser/contributions/ for a person to look at.
"""
from __future__ import annotations

import pytest

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, timed
from test_figures_draw_browser import problems_on, watch_console
from test_presenter_browser import WINDOW, presenter_problems, shoot

SHOTS = ARTIFACTS / "contributions"
FIGURES = {"contrib_share_bars", "contrib_rollout", "contrib_cross", "contrib_attention"}
PAIR = "text=three+hundred+and+fourteen&forced=reference"               # the first test pair, on its reference

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")


@pytest.mark.parametrize("present", [False, True], ids=["laptop", "presenter"])
def test_the_contributions_page_draws(visit, present):
    page = visit.page
    if present:
        page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    problems = []
    extra = "&present=1" if present else ""
    mode = "presenter" if present else "laptop"
    with timed(f"contributions ({mode})"):
        page.goto(f"{visit.url}/contributions?ckpt={NUMBERS}&{PAIR}{extra}")
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        page.locator(".st-key-contrib_curve_button button").click()
        page.wait_for_selector(".st-key-contrib_curve .js-plotly-plot", timeout=LONG)
        idle(page)
        problems += problems_on(page, f"contributions ({mode})", errors, FIGURES | {"contrib_curve"})
    if present:
        problems += presenter_problems(page, "contributions (presenter)")
    if page.locator("[data-testid='stException']").count():
        problems.append(f"contributions ({mode}): a traceback is on screen")
    shoot(page, SHOTS, f"contributions_{mode}", sorted(FIGURES | {"contrib_curve"}))
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()
