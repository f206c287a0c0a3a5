"""The Layers and Causes pages in a real browser (headless Chromium), as a student's laptop and as a
projector in presenter mode at 1024x768: every figure draws (a mark of non-zero size, as
test_figures_draw_browser.py checks it), including the patching grids behind the Causes page's button;
no console error, no traceback on screen or in the server's log (conftest); in presenter mode no text
under webapp.presenter.MIN_PX and every figure full width (test_presenter_browser.py's measures). A
screenshot of each view goes to test-artifacts/browser/layers/ for a person to look at.
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from browser_support import ARTIFACTS, LONG, NUMBERS, ROOT, idle, reopen_in_a_fresh_session, timed
from test_figures_draw_browser import problems_on, watch_console
from test_presenter_browser import WINDOW, presenter_problems, shoot

SHOTS = ARTIFACTS / "layers"
GRIDS = {"causes_encoder", "causes_decoder", "causes_heads", "causes_changed"}
PAIR = "text=three+hundred+and+twenty+one&pair=own&corrupt=three+hundred+and+twenty+two"

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{NUMBERS}")


def click_a_cell(page, mode: str) -> list[str]:
    """Click the encoder grid's cell of row 1, column 2 (3 depths x 6 source pieces): it becomes the picked
    cell (the URL's grid, row and col; the picked cell's line names it)."""
    target = page.locator(".st-key-causes_encoder .nsewdrag").first
    target.scroll_into_view_if_needed()                 # a click lands only on what the window shows
    area = target.bounding_box()
    rows, cols = 3, 6
    page.mouse.click(area["x"] + 1.5 * area["width"] / cols, area["y"] + 0.5 * area["height"] / rows)
    try:
        page.wait_for_function("() => location.search.includes('row=1') && location.search.includes('col=2')",
                               timeout=LONG)
    except Exception:  # noqa: BLE001 - reported below with the URL
        return [f"causes ({mode}): a click on a cell did not pick it: {page.url}"]
    idle(page)
    if "grid=encoder_resid" not in page.url or page.get_by_text("embeddings, 2: ▁hundred").count() != 1:
        return [f"causes ({mode}): the clicked cell is not the picked one: {page.url}"]
    return []


@pytest.mark.parametrize("present", [False, True], ids=["laptop", "presenter"])
def test_the_layers_and_causes_pages_draw(visit, context, present):
    page = visit.page
    if present:
        page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    problems = []
    extra = "&present=1" if present else ""
    mode = "presenter" if present else "laptop"
    with timed(f"layers ({mode})"):
        page.goto(f"{visit.url}/layers?ckpt={NUMBERS}{extra}")
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        problems += problems_on(page, f"layers ({mode})", errors, {"layers_lens_grid"})
    if present:
        problems += presenter_problems(page, "layers (presenter)")
    shoot(page, SHOTS, f"layers_{mode}", ["layers_lens_grid"])
    errors.clear()
    with timed(f"causes: patch one pair ({mode})"):
        page.goto(f"{visit.url}/causes?ckpt={NUMBERS}&{PAIR}{extra}")
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        start, grids = page.locator(".st-key-causes_start button"), page.locator(".st-key-causes_heads .js-plotly-plot")
        start.or_(grids).first.wait_for(timeout=LONG)
        if start.count():               # a server that already holds this pair's grids shows them with no press
            start.click()
        grids.first.wait_for(timeout=LONG)
        idle(page)
        problems += problems_on(page, f"causes ({mode})", errors, GRIDS)
    if present:
        problems += presenter_problems(page, "causes (presenter)")
    if page.locator("[data-testid='stException']").count():
        problems.append(f"causes ({mode}): a traceback is on screen")
    assert page.get_by_text("patched translates as").count() == 1, "the picked cell's translation is not shown"
    problems += click_a_cell(page, mode)
    shoot(page, SHOTS, f"causes_{mode}", sorted(GRIDS))
    assert not problems, "\n".join(problems)
    if not present:                 # the page's link, shared: the server holds the grids, shown with no press
        link = page.url
        query = reopen_in_a_fresh_session(context, link, ".st-key-causes_heads .js-plotly-plot",
                                          absent=(".st-key-causes_start",))
        shared = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
        cell = ("grid", "row", "col", "dir")
        assert [query.get(k) for k in cell] == [shared.get(k) for k in cell] and shared.get("grid"), (shared, query)
    visit.assert_offline_and_quiet()
