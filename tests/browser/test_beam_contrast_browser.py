"""The Beam search page's contrast and reference views in a real browser (headless Chromium), one walk on
the shipped bible-es-en: a click on a pruned node of the tree opens the contrast with it as the foil (the
contrast figure draws); picking a test verse shows where its reference left the beam and the verdict;
the same view opened by its link in presenter mode at 1024x768 shows both again, with no text under
webapp.presenter.MIN_PX and every figure full width (test_presenter_browser's measures). No console
error, no traceback. Screenshots go to test-artifacts/browser/beam_contrast/ for a person to look at.
"""
from __future__ import annotations

import re

import pytest

from browser_support import ARTIFACTS, BIBLE, LONG, ROOT, idle, no_exception, open_dropdown, timed
from test_figures_draw_browser import problems_on, watch_console
from test_presenter_browser import WINDOW, presenter_problems, shoot

SHOTS = ARTIFACTS / "beam_contrast"
GENESIS = "text=En+el+principio+cre%C3%B3+Dios+los+cielos+y+la+tierra."
PRUNED_FILL = "rgb(176, 176, 176)"        # explorer.plots.beams.STATUS_COLOURS["pruned"]
VERDICT = re.compile(r"(Model|Search) error|the output is the reference")

pytestmark = pytest.mark.skipif(not (ROOT / "checkpoints" / BIBLE / "model.safetensors").is_file(),
                                reason=f"needs checkpoints/{BIBLE}")

# The centre of a pruned node of the tree (plotly draws each node as a path.point), in window pixels.
PRUNED_NODE = """fill => {
  const points = document.querySelectorAll(".st-key-beam_tree .scatterlayer .trace path.point");
  for (const p of points) {
    if (getComputedStyle(p).fill !== fill) continue;
    const r = p.getBoundingClientRect();
    if (r.width > 0 && r.y > 0 && r.y < window.innerHeight) return {x: r.x + r.width / 2, y: r.y + r.height / 2};
  }
  return null;
}"""


def click_a_pruned_node(page) -> None:
    page.locator(".st-key-beam_tree").scroll_into_view_if_needed()
    page.wait_for_selector(".st-key-beam_tree .scatterlayer path.point", timeout=LONG)
    node = page.evaluate(PRUNED_NODE, PRUNED_FILL)
    assert node is not None, "no pruned node of the tree on screen"
    page.mouse.click(node["x"], node["y"])
    page.wait_for_function("() => location.search.includes('contrast=1')", timeout=LONG)
    page.wait_for_selector(".st-key-beam_contrast_chart .js-plotly-plot", timeout=LONG)
    idle(page)


def pick_the_first_verse(page) -> None:
    """As a teacher does it: in presenter mode the sentence and the search's settings are folded away, so
    the panel that holds the verse picker is opened first."""
    folded = page.locator("[data-testid='stExpander'] summary", has_text="Sentence and search settings")
    if folded.count() and folded.first.evaluate("s => !s.parentElement.open"):
        folded.first.click()
    page.locator(".st-key-beam_verse input").first.wait_for(state="visible", timeout=LONG)
    page.locator(".st-key-beam_verse").scroll_into_view_if_needed()
    idle(page)
    open_dropdown(page, page.locator(".st-key-beam_verse input").first).nth(1).click()   # 0: the sentence as typed
    page.wait_for_function("() => location.search.includes('verse=1')", timeout=LONG)
    idle(page)


def test_click_a_pruned_candidate_then_follow_a_test_verses_reference(visit):
    """One walk, in presenter mode at 1024x768 (a laptop's page is the same page in smaller type)."""
    page = visit.page
    page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    with timed("beam: click a pruned node (presenter)"):
        page.goto(f"{visit.url}/beam?ckpt={BIBLE}&{GENESIS}&present=1")
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        click_a_pruned_node(page)
    no_exception(page)
    assert page.get_by_text("rather than").count() >= 1, "the contrast's sentence is not shown"
    assert page.get_by_text("Completeness").count() == 1
    problems = problems_on(page, "beam contrast", errors, {"beam_tree", "beam_contrast_chart"})
    shoot(page, SHOTS, "contrast", ["beam_tree", "beam_contrast_chart"])
    with timed("beam: pick a test verse (presenter)"):
        pick_the_first_verse(page)
        page.get_by_text("Left the beam at step", exact=True).wait_for(timeout=LONG)
    no_exception(page)
    assert page.get_by_text(VERDICT).count() >= 1, "no verdict on the reference"
    assert "contrast=1" in page.url and "verse=1" in page.url              # the view is in its link
    problems += presenter_problems(page, "beam contrast and fall (presenter)")
    page.locator(".st-key-beam_fall_go").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "fall.png"))
    assert not problems, "\n".join(problems)
    visit.assert_offline_and_quiet()
