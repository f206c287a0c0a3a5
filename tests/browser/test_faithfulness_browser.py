"""The faithfulness tables beside the app's attributions in a real browser (headless Chromium): the
Contributions page's behind its button, the Alignment page's "why this word" and the Beam search page's
contrast, each on the shipped numbers-en-de, in presenter mode at 1024x768 (no text under
webapp.presenter.MIN_PX, every figure full width) and on a laptop: the table and its explanation are on
screen, no console error, no traceback. Screenshots go to test-artifacts/browser/faithfulness/ for a
person to look at.
"""
from __future__ import annotations

import pytest

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, no_exception, timed
from test_figures_draw_browser import watch_console
from test_presenter_browser import WINDOW, presenter_problems

SHOTS = ARTIFACTS / "faithfulness"
TEXT = "text=three+hundred+and+fourteen"
TABLE = "[data-testid='stTable']:has-text('random: comprehensiveness')"
PAGES = {"contributions": f"contributions?ckpt={NUMBERS}&{TEXT}&forced=reference",
         "alignment": f"alignment?ckpt={NUMBERS}&{TEXT}",
         "beam": f"beam?ckpt={NUMBERS}&{TEXT}&contrast=1"}

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")


@pytest.mark.parametrize("present", [False, True], ids=["laptop", "presenter"])
def test_each_attributions_faithfulness_is_on_screen(visit, present):
    page = visit.page
    if present:
        page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    problems = []
    mode = "presenter" if present else "laptop"
    for name, link in PAGES.items():
        with timed(f"faithfulness: {name} ({mode})"):
            page.goto(f"{visit.url}/{link}{'&present=1' if present else ''}")
            page.wait_for_selector("h1", timeout=LONG)
            idle(page)
            table = page.locator(TABLE)
            if name == "contributions":              # a server that measured this pair before shows it at once
                button = page.locator(".st-key-contrib_faith_button button")
                button.or_(table).first.wait_for(timeout=LONG)
                if button.count():
                    button.click()
            table.wait_for(timeout=LONG)
            idle(page)
        no_exception(page)
        table.scroll_into_view_if_needed()
        assert table.locator("tbody tr").count() >= 2, f"{name}: the table has no rows"
        assert page.get_by_text("random orders").count() == 1, f"{name}: no explanation under the table"
        if present:
            problems += presenter_problems(page, f"faithfulness on {name} (presenter)")
        SHOTS.mkdir(parents=True, exist_ok=True)
        table.screenshot(path=str(SHOTS / f"{name}_{mode}_table.png"))
        page.screenshot(path=str(SHOTS / f"{name}_{mode}.png"))         # the table with its explanation
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()
