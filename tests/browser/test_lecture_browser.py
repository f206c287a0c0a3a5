"""The lecture in a real browser: from the landing page to the last page by clicking each page's
"Next" link, in presenter mode, as a teacher at a projector would. Each page must show its own
title, keep the checkpoint, the sentence and presenter mode, draw no traceback and fetch nothing
from outside 127.0.0.1.
"""
from __future__ import annotations

from browser_support import (ARTIFACTS, LONG, NUMBERS, _heading, idle, no_exception, open_app, timed,
                             url_param)

NUMBER_TEXT = "three hundred and twenty one"
# The page titles in the order of the lecture (written out here, not read from webapp.lecture).
ORDER = ["Architecture", "Positional encoding", "Attention", "Layers", "Causes", "Heads", "Contributions", "Alignment",
         "Beam search", "Training vs inference", "Schedule", "Train", "Checkpoints"]
NEXT = "[data-testid='stMain'] a:has-text('Next:')"


def title(page) -> str:
    return page.locator("[data-testid='stMain'] h1").first.inner_text().strip()


def larger_type(page) -> None:
    """The root font is larger than Streamlit's 16 px: presenter mode's style, which arrives with the
    script run's elements (waited for, not read at once: a loaded machine delivers it later)."""
    page.wait_for_function("() => parseFloat(getComputedStyle(document.documentElement).fontSize) > 16",
                           timeout=LONG)


def test_follow_the_lecture_in_presenter_mode(visit):
    page = open_app(visit, ckpt=NUMBERS, text=NUMBER_TEXT, present="1")
    assert title(page) == "Translate"
    # presenter mode is on: the toggle says so and the type is larger than Streamlit's 16 px
    larger_type(page)
    for expected in ORDER:
        link = page.locator(NEXT)
        link.first.wait_for(timeout=LONG)           # drawn under the page once its run is over
        idle(page)
        assert link.count() == 1, f"{title(page)}: {link.count()} 'Next' links"
        assert f"Next: {expected} — " in link.inner_text()
        with timed(f"Next -> {expected}"):
            link.click()
            page.wait_for_function("t => [...document.querySelectorAll('h1')].some(h => h.innerText.startsWith(t))",
                                   arg=_heading(expected), timeout=LONG)
            idle(page)
        assert title(page).startswith(_heading(expected))
        no_exception(page)
        assert url_param(page, "present") == "1", f"{expected}: presenter mode was dropped from the URL"
        assert url_param(page, "ckpt") == NUMBERS and url_param(page, "text") == NUMBER_TEXT
        larger_type(page)
        page.screenshot(path=str(ARTIFACTS / f"lecture_{expected.replace(' ', '_').lower()}.png"))
    assert page.locator(NEXT).count() == 0                                  # the last page
    assert page.locator("[data-testid='stMain'] a:has-text('End of the lecture')").count() == 1
    assert page.get_by_text("Presenter mode").count() >= 1
    visit.assert_offline_and_quiet()
