"""Every plotly figure on every page draws in a real browser (headless Chromium, plotly.js as Streamlit
ships it). Here: each page opened fresh by URL on the Bible model. The same checks run on the numbers
model on every page reached from the sidebar (tests/browser/test_app_browser.py) and in presenter mode at
1024x768 on every page reached by the lecture's Next links (tests/browser/test_presenter_browser.py).

Why a browser: plotly.js can reject a figure that Python's plotly builds and serialises without a word
(three one-row heatmaps on one categorical y axis made the Training vs inference page's two central
figures empty boxes: "Cannot read properties of undefined (reading 'length')"). The AppTests never draw,
so only a browser sees it.

For each page of the app (webapp.lecture.PAGES_TABLE) (opened by URL in a laptop's 1024x768 window, each a
fresh Streamlit session, after its script run ends): every `.js-plotly-plot` has a non-zero size and at least one mark drawn with a non-zero size (a
heatmap's <image> in its `.hm` group, a trace's paths, points or bars, or a shape of a shapes-only
figure such as the Architecture diagram), the charts a page is known to draw on opening are there, and
the browser console shows no error and the page raised none. Figures inside tabs are checked by
clicking each tab. The drawn marks are what sees an empty box: Streamlit catches plotly.js's exception
and the console stays silent. Then the page's Learn panel is unfolded and each display formula must fit
its page (KaTeX draws one on a single line and a wider one scrolls sideways, cut at the page's edge: the
Positional-encoding formula was 1033 px in 906 px at 1400 px wide; Translate's, Beam search's and five
others' were cut at 1024 px). In presenter mode's larger type the lecture walk
(tests/browser/test_presenter_browser.py) measures them; at 1400x900 the column is wider, so a formula
that fits at 1024 fits there.

Checked on opening (figures_drawn.log in test-artifacts/browser/ lists them per run): Translate's token
probabilities; Architecture's diagram and the open block's worked figures; Attention's grid, zoom,
statistics, alignment and comparison tabs; Alignment's links and "why this word"; Positional encoding's
five tabs and norms; Beam search's tree and step attention; Training vs inference's two rows figures and
the causal mask; Train's planned schedule; Schedule's three; Checkpoints' comparison, grid, parameter
change and attention over training. test_the_alignment_scorecard_draws adds the scorecard's AER grid
(a button, 4 gold pairs, no gradients: seconds).

Not covered (each needs a click that starts a computation, or state that a fresh server lacks):
- Heads: every figure; they appear once a head-lab run (a background job of minutes) has finished.
- Architecture: the worked figures of the other blocks (a click on the diagram picks one).
- Attention: the head-ablation figures (heads must be picked for ablation and the sentence re-decoded).
- Beam search: the forced search's figures ("Force and re-decode" with a typed piece).
- Train / Schedule: a training job's curves and its learning rate (a job must be started).
"""
from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from browser_support import (ARTIFACTS, BIBLE, LONG, NUMBERS, ROOT, idle, learn_formula_problems, open_tab,
                             reopen_in_a_fresh_session, timed)
from webapp import lecture

# Every page of the app, from its page table (app.py builds the sidebar from it).
PATHS = [entry.url_path for entry in lecture.PAGES_TABLE]
LAPTOP = {"width": 1024, "height": 768}          # a laptop's window, the sidebar open
# Charts each page draws on opening (by widget key): the check cannot pass on a page that drew nothing.
EXPECTED = {
    "translate": {"token_probs"},
    "architecture": {"arch_diagram"},
    "attention": {"attn_zoom"},
    "alignment": {"align_links", "align_why_fig"},
    "layers": {"layers_lens_grid"},
    "beam": {"beam_tree"},
    "training_vs_inference": {"tvi_forced_rows", "tvi_steps_rows", "tvi_mask"},
    "train": {"tr_planned"},
    "schedule": {"sc_curves"},
}
# What counts as drawn: heatmaps are an <image> in a `.hm` group (`.heatmaplayer`); scatter, bar and
# other traces draw paths and points in their `.trace` group; a figure of shapes draws in `.shapelayer`.
MARKS = ".hm image, .heatmaplayer image, .trace path, .trace rect, path.point, .shapelayer path, .imagelayer image"
REPORT = """marks => [...document.querySelectorAll('.js-plotly-plot')].map((el, i) => {
  const box = el.getBoundingClientRect();
  const holder = el.closest('[class*="st-key-"]');
  const key = holder ? [...holder.classList].find(c => c.startsWith('st-key-')).slice(7) : '#' + i;
  const drawn = [...el.querySelectorAll(marks)].filter(m => {
    const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; }).length;
  const title = el.querySelector('.gtitle');
  return {key, title: title ? title.textContent : '', width: Math.round(box.width), height: Math.round(box.height),
          visible: el.checkVisibility(), drawn};
})"""
# Until every chart Streamlit shows holds a drawn plotly figure (or the wait gives up and the report says which).
ALL_DRAWN = """marks => {
  if (document.querySelector("[data-testid='stMain'] [data-testid='stSkeleton']")) return false;   // chart code loading
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart']")].filter(c => c.checkVisibility());
  return charts.every(c => { const el = c.querySelector('.js-plotly-plot');
    return el && [...el.querySelectorAll(marks)].some(m => {
      const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; }); });
}"""
SETTLE_MS = LONG               # a hang guard: drawn figures end the wait; one that never draws fails below


def wait_drawn(page) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_function(ALL_DRAWN, arg=MARKS, timeout=SETTLE_MS)
    except PlaywrightTimeout:
        pass                                   # the report names what did not draw


def figures(page) -> dict[str, dict]:
    """Every figure on the page by key (charts in other tabs: after clicking those tabs)."""
    wait_drawn(page)
    seen = {f["key"]: f for f in page.evaluate(REPORT, MARKS) if f["visible"]}
    tabs = page.locator("[data-testid='stMain'] [role='tab']")
    for i in range(tabs.count()):
        tab = tabs.nth(i)
        if tab.get_attribute("aria-selected") == "true":
            continue
        open_tab(page, tab)                    # a lazy tab runs its part of the script once open
        wait_drawn(page)
        for f in page.evaluate(REPORT, MARKS):
            if f["visible"]:
                seen[f["key"]] = f
    for f in page.evaluate(REPORT, MARKS):     # never shown at all (a tab that would not open): reported too
        seen.setdefault(f["key"], f)
    return seen


def loading(page) -> int:
    """Placeholders of elements whose code never arrived (Streamlit draws a skeleton meanwhile)."""
    return page.locator("[data-testid='stMain'] [data-testid='stSkeleton']").count()


def streamlit_probe(url: str) -> bool:
    """Streamlit's own first requests from a page opened at /<page>: it asks /<page>/_stcore/health and
    /host-config, gets 404 (the server lives at /), and goes on at the root. Chromium logs each 404 as a
    console error; they are the framework's, not the page's."""
    return bool(re.search(r"^https?://[^/]+/\w+/_stcore/(health|host-config)$", url))


def watch_console(page) -> list[str]:
    """The console's errors and the page's uncaught exceptions from now on (a list that fills as they come)."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.text[:300]} ({m.location.get('url', '')})")
            if m.type == "error" and not streamlit_probe(m.location.get("url", "")) else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {str(e)[:300]}"))
    return errors


def problems_on(page, path: str, errors: list[str], expected: set[str] | None = None) -> list[str]:
    """What is wrong with the figures on the page now (`expected`: the chart keys it must show, by default
    EXPECTED's for `path`), and the console's errors."""
    found = figures(page)
    with open(ARTIFACTS / "figures_drawn.log", "a") as log:      # which figures each run checked
        log.write(f"{path}: " + ", ".join(f"{k} ({f['drawn']} marks)" for k, f in found.items()) + "\n")
    expected = EXPECTED.get(path, set()) if expected is None else expected
    out = [f"{path}: chart {key!r} is not on the page" for key in sorted(expected - set(found))]
    for key, f in found.items():
        if not (f["width"] > 0 and f["height"] > 0 and f["drawn"] > 0):
            out.append(f"{path}: figure {key!r} ({f['title']!r}) drew nothing: {f['width']}x{f['height']} px, "
                       f"{f['drawn']} marks")
    if loading(page):
        out.append(f"{path}: {loading(page)} element(s) still loading {SETTLE_MS // 1000} s after the run ended")
    out += [f"{path}: console: {e}" for e in errors]
    return out


def test_every_figure_on_every_page_draws(visit):
    name, query = "bible", {"ckpt": BIBLE}
    if not (ROOT / "checkpoints" / query["ckpt"] / "model.safetensors").is_file():
        pytest.skip(f"needs checkpoints/{query['ckpt']}")
    assert len(PATHS) >= 10 and "training_vs_inference" in PATHS, f"pages read from the page table: {PATHS}"
    page = visit.page
    page.set_viewport_size(LAPTOP)
    errors = watch_console(page)
    problems, counts = [], {}
    for path in PATHS:
        errors.clear()
        with timed(f"figures of /{path} ({name})"):
            page.goto(f"{visit.url}/{path}?" + "&".join(f"{k}={v}" for k, v in query.items()))
            page.wait_for_selector("h1", timeout=LONG)
            idle(page)
            shown = page.locator("[data-testid='stException']")
            if shown.count():
                problems.append(f"{path}: a traceback is on screen: {shown.first.inner_text()[:300]}")
            found = problems_on(page, path, errors)
        counts[path] = page.locator(".js-plotly-plot").count()
        problems += found + learn_formula_problems(page, f"{path} at {LAPTOP['width']} px")
    assert not problems, f"{name}: figures that did not draw, or errors:\n" + "\n".join(problems)
    assert sum(counts.values()) >= 10, f"too few figures to have checked anything: {counts}"
    visit.assert_offline_and_quiet()


def start_until_scored(page, done: str) -> None:
    """Press the scorecard's start button and wait for `done` (the job ended and the page reran). A press
    can land while the page is re-running after the settings changed and be lost: then nothing starts
    and the button is still there once the page is idle, so it is pressed again. Only the stall window
    (LONG, a hang guard) ends the wait without `done`."""
    deadline = time.monotonic() + 2 * LONG / 1000
    button, finished = page.locator(".st-key-align_start button"), page.get_by_text(done)
    while time.monotonic() < deadline:
        if button.count():
            button.click()
        try:
            finished.wait_for(timeout=15_000)       # one look; the loop, not this, is the only bound
            return
        except PlaywrightTimeout:
            idle(page)
    raise AssertionError(f"hang guard: {done!r} not shown within the stall window ({2 * LONG // 1000} s)")


def test_the_alignment_scorecard_draws(visit, context):
    """The one figure behind a button that is quick to reach: the scorecard over 4 gold pairs of the
    numbers model without gradients (seconds). Its table and AER grid draw, and showing the table logs no
    traceback in the server (it did: layer numbers mixed with "" failed Arrow's conversion; the
    conftest's server-log check fails the test). The page's link, opened in a fresh session, shows the
    scorecard again without a press."""
    if not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file():
        pytest.skip(f"needs checkpoints/{NUMBERS}")
    page = visit.page
    errors = watch_console(page)
    page.goto(f"{visit.url}/alignment?ckpt={NUMBERS}")
    page.wait_for_selector("h1", timeout=LONG)
    idle(page)
    for key, param, value in (("align_n", "pairs", "4"), ("align_attr", "grad", "0")):  # neither the default
        box = page.locator(f".st-key-{key} input")
        box.fill(value)
        box.press("Enter")
        page.wait_for_function("([k, v]) => new URLSearchParams(location.search).get(k) === v",   # the server's
                               arg=[param, value], timeout=LONG)                             # run wrote it
        idle(page)
    with timed("alignment scorecard: 4 pairs, no gradients"):
        start_until_scored(page, "Scored on 4 gold pairs")
        idle(page)
    page.wait_for_selector("[data-testid='stMain'] [data-testid='stDataFrame']", timeout=LONG)  # the table drew
    problems = problems_on(page, "alignment (scorecard)", errors, EXPECTED["alignment"] | {"align_grid"})
    assert not problems, "\n".join(problems)
    query = reopen_in_a_fresh_session(context, page.url, ".st-key-align_grid .js-plotly-plot",   # a shared link
                                      absent=(".st-key-align_start",))
    assert (query["pairs"], query["grad"]) == ("4", "0")
    visit.assert_offline_and_quiet()
