"""The lecture as a projector shows it: every page at 1024x768 in a real browser (headless Chromium),
reached as a teacher reaches it: from the landing page to the last page by clicking each page's "Next"
link in presenter mode. Each page must show its own title (in the lecture's order, written out here in
ORDER, not read from webapp.lecture), keep the checkpoint, the sentence and presenter mode in the URL,
draw no traceback and fetch nothing from outside 127.0.0.1; the last page says the lecture ends.

What a class at the back of a room needs, measured on each page after its script run ends:

- no text smaller than webapp.presenter.MIN_PX: every visible text of the page's main area, HTML text
  (body, captions, labels, tabs, inline code) and plotly's SVG text (titles, ticks, legends, annotations,
  the beam tree's pieces), each at the size the screen shows it (its computed font size times the SVG's
  scale); tables drawn on a canvas (st.dataframe) are not text in the page and are not measured;
- the sidebar collapsed and the page's content full width (at least FULL_WIDTH of the window);
- every figure full width (stacked, never a narrow column beside another: the window is narrower than
  webapp.presenter.STACK_BELOW_PX), and drawn (a mark of non-zero size, as tests/browser/
  test_figures_draw_browser.py checks it), with no console error;
- on Translate, the translation on the first screen, above the Learn panel; and on the Bible model's
  Translate page too, with no plotly warning in the console (its probability bars once logged "Invalid
  color specifier" for each bar), for an everyday sentence the model guesses at: there the verdict
  ("Guessing.") and its line on the made-up words on the first screen too, in type of MIN_PX or more,
  and the translation's marked words readable (the marks are text of the translation box).

The smallest size per page, with the text that has it, goes to test-artifacts/browser/presenter_fonts.log,
and a screenshot of each page's first screen to test-artifacts/browser/presenter/<page>.png: a person
looks at them; the test holds the numbers.

On each page of that walk, once its run ends (on the Causes page, once its button brought the grids),
bounding boxes are measured too: the page's main figure (MAIN: its first result, a figure
or the table that is the result) starts on the first screen with at least SHOWN_PX of it showing, and
nothing runs past the window's right edge or is cut at its own: no figure or table wider than the window,
no table whose columns scroll sideways, no select box whose value is cut, no formula that scrolls. The
Heads and Search pages draw their figures from a background job's result (minutes): there only the right
edge is measured.
Then the page's Learn panel (folded in presenter mode) is unfolded, and each of its display formulas must
fit (KaTeX draws one on a single line, and a wider one scrolls sideways, cut at the page's edge).
"""
from __future__ import annotations

from urllib.parse import quote

import pytest

from browser_support import (ARTIFACTS, BIBLE, LONG, NUMBERS, ROOT, _heading, fold_learn, idle, learn_formula_problems,
                             no_exception, open_app, open_tab, timed, url_param)
from test_figures_draw_browser import EXPECTED, problems_on, wait_drawn, watch_console
from webapp import lecture, presenter

WINDOW = {"width": 1024, "height": 768}
NUMBER_TEXT = "three hundred and twenty one"
# The page titles in the order of the lecture (written out here, not read from webapp.lecture).
ORDER = ["Translate", "Architecture", "Positional encoding", "Attention", "Layers", "Causes", "Features", "Graphs", "Heads",
         "Contributions",
         "Alignment", "Search", "Beam search", "Training vs inference", "Schedule", "Train", "Checkpoints"]
NEXT = "[data-testid='stMain'] a:has-text('Next:')"
FULL_WIDTH = 0.9                # the content's share of the window's width
# Every visible text in the main area, smallest first: [{px, text, svg, key}] (key: the nearest keyed element).
TEXT_SIZES = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const out = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.replace(/[\\s\\u200b-\\u200d\\ufeff]/g, '');
    const el = n.parentElement;
    if (!text || !el || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    let px = parseFloat(getComputedStyle(el).fontSize);
    if (el.closest('svg') && el.getScreenCTM) { const m = el.getScreenCTM(); if (m) px *= Math.hypot(m.a, m.b); }
    const holder = el.closest("[class*='st-key-']");
    const key = holder ? [...holder.classList].find(c => c.startsWith('st-key-')).slice(7) : '';
    out.push({px: Math.round(px * 10) / 10, text: n.textContent.trim().slice(0, 40), svg: !!el.closest('svg'), key});
  }
  return out.sort((a, b) => a.px - b.px);
}"""
LAYOUT = """() => {
  const side = document.querySelector("[data-testid='stSidebar']");
  const sideBox = side ? side.getBoundingClientRect() : null;
  const block = document.querySelector("[data-testid='stMainBlockContainer']"), style = getComputedStyle(block);
  const inner = block.getBoundingClientRect().width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const charts = [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")]
    .filter(el => el.checkVisibility()).map(el => {
      const holder = el.closest("[class*='st-key-']");
      return {key: holder ? [...holder.classList].find(c => c.startsWith('st-key-')).slice(7) : '',
              width: el.getBoundingClientRect().width}; });
  return {sidebar: sideBox ? Math.max(0, Math.min(sideBox.right, innerWidth) - Math.max(sideBox.left, 0)) : 0,
          window: block.getBoundingClientRect().width, content: inner, charts};
}"""
# Where the translation and the Learn panel are on the Translate page (px from the window's top).
TRANSLATE_PLACES = """() => {
  const shown = document.querySelector('.st-key-translation h4');
  const learn = [...document.querySelectorAll("[data-testid='stExpander'] summary")]
    .find(s => s.innerText.startsWith('Learn'));
  const verdict = document.querySelector('.st-key-grounding_verdict [data-testid="stAlert"]');
  const lines = [...document.querySelectorAll('.st-key-grounding_verdict [data-testid="stCaptionContainer"]')];
  const madeUp = lines.find(c => c.innerText.startsWith('Output words'));
  return {translation: shown ? shown.getBoundingClientRect().bottom : null,
          learn: learn ? learn.getBoundingClientRect().top : null,
          verdict: verdict ? verdict.innerText.slice(0, 40) : null,
          verdictBottom: verdict ? verdict.getBoundingClientRect().bottom : null,
          madeUpBottom: madeUp ? madeUp.getBoundingClientRect().bottom : null};
}"""
EVERYDAY = "El presidente habló con los periodistas sobre la economía."


def text_sizes(page) -> list[dict]:
    """TEXT_SIZES in each of the page's tabs (opened in turn, the first one last), smallest first."""
    tabs = page.locator("[data-testid='stMain'] [role='tab']")
    sizes = []
    for i in [*range(1, tabs.count()), 0]:
        if tabs.count():
            open_tab(page, tabs.nth(i))
            wait_drawn(page)
        sizes += page.evaluate(TEXT_SIZES)
    return sorted(sizes, key=lambda s: s["px"])


def presenter_problems(page, where: str) -> list[str]:
    """Text under MIN_PX, and figures narrower than the content (test_presenter_browser's rules)."""
    out = []
    small = [s for s in text_sizes(page) if s["px"] < presenter.MIN_PX]
    if small:
        out.append(f"{where}: {len(small)} text(s) under {presenter.MIN_PX} px, e.g. {small[:4]}")
    layout = page.evaluate(LAYOUT)
    narrow = [c for c in layout["charts"] if c["width"] < FULL_WIDTH * layout["content"]]
    if narrow:
        out.append(f"{where}: figures not full width: {narrow}")
    return out


def shoot(page, folder, name: str, keys=()) -> None:
    """The first screen, and each keyed figure on its own (the page scrolls inside Streamlit's main area),
    into `folder` for a person to look at."""
    folder.mkdir(parents=True, exist_ok=True)
    for key in keys:
        page.locator(f".st-key-{key}").screenshot(path=str(folder / f"{name}_{key}.png"))
    page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    page.screenshot(path=str(folder / f"{name}.png"))


def title(page) -> str:
    return page.locator("[data-testid='stMain'] h1").first.inner_text().strip()


def larger_type(page) -> None:
    """The root font is larger than Streamlit's 16 px: presenter mode's style, which arrives with the
    script run's elements (waited for, not read at once: a loaded machine delivers it later)."""
    page.wait_for_function("() => parseFloat(getComputedStyle(document.documentElement).fontSize) > 16",
                           timeout=LONG)


def next_page(page, expected: str) -> None:
    """Click the one "Next" link under the page, which must name `expected`; wait for its title."""
    link = page.locator(NEXT)
    link.first.wait_for(timeout=LONG)           # drawn under the page once its run is over
    idle(page)
    assert link.count() == 1, f"{title(page)}: {link.count()} 'Next' links"
    assert f"Next: {expected} — " in link.inner_text()
    link.click()                                # scrolled into view first, as a user scrolls to it
    page.wait_for_function("t => [...document.querySelectorAll('h1')].some(h => h.innerText.startsWith(t))",
                           arg=_heading(expected), timeout=LONG)
    idle(page)
    # the page opens at its top: it opened at the scroll position the last one was left at, past its title
    down = page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollTop")
    assert down == 0, f"{expected}: opened {down} px down the page, not at its top"


def page_problems(page, shown: str, path: str, errors: list[str], warnings: list[str], smallest: dict) -> list[str]:
    """Every presenter-mode check on the page now; its smallest text goes into `smallest`."""
    problems = problems_on(page, f"{shown} (presenter)", errors, EXPECTED.get(path, set()))  # figures drawn
    sizes = text_sizes(page)                                               # in every tab
    page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "presenter" / f"{shown.replace(' ', '_')}.png"))
    assert sizes, f"{shown}: no text measured"
    smallest[shown] = sizes[0]
    if warnings:
        problems.append(f"{shown}: plotly warned in the console: {sorted(set(warnings))[:3]}")
    small = [s for s in sizes if s["px"] < presenter.MIN_PX]
    if small:
        problems.append(f"{shown}: {len(small)} text(s) under {presenter.MIN_PX} px, e.g. {small[:4]}")
    layout = page.evaluate(LAYOUT)
    if layout["sidebar"] > 1:
        problems.append(f"{shown}: the sidebar is open ({layout['sidebar']:.0f} px of the window)")
    if layout["content"] < FULL_WIDTH * WINDOW["width"]:
        problems.append(f"{shown}: the content is {layout['content']:.0f} px wide, not the window's width "
                        f"({layout['window']:.0f} px with its margins)")
    narrow = [c for c in layout["charts"] if c["width"] < FULL_WIDTH * layout["content"]]
    if narrow:
        problems.append(f"{shown}: figures not stacked to full width: {narrow}")
    if path == lecture.START:
        places = page.evaluate(TRANSLATE_PLACES)
        if places["translation"] is None or places["translation"] > WINDOW["height"]:
            problems.append(f"{shown}: the translation is not on the first screen ({places})")
        elif places["learn"] is not None and places["learn"] < places["translation"]:
            problems.append(f"{shown}: the Learn panel comes before the translation ({places})")
        if BIBLE in shown:                      # an everyday sentence: the verdict is read from the back row
            if not (places["verdict"] or "").startswith("Guessing."):
                problems.append(f"{shown}: no 'Guessing.' verdict under the translation ({places})")
            elif max(places["verdictBottom"], places["madeUpBottom"] or 0) > WINDOW["height"]:
                problems.append(f"{shown}: the verdict or its made-up words line is below the first screen ({places})")
    return problems


def test_follow_the_lecture_in_presenter_mode_at_1024x768(visit):
    if not (ROOT / "checkpoints" / NUMBERS / "model.safetensors").is_file():
        pytest.skip(f"needs checkpoints/{NUMBERS}")
    assert WINDOW["width"] < presenter.STACK_BELOW_PX
    assert [entry.title for entry in lecture.PAGES_TABLE] == ORDER, "the lecture's pages changed: update ORDER"
    assert set(MAIN) == {entry.url_path for entry in lecture.PAGES_TABLE}, "the lecture's pages changed: update MAIN"
    page = visit.page
    page.set_viewport_size(WINDOW)
    errors = watch_console(page)
    warnings: list[str] = []                   # plotly.js's own warnings ("WARN: ..."), logged at level trace
    page.on("console", lambda m: warnings.append(m.text[:200]) if m.text.startswith("WARN:") else None)
    (ARTIFACTS / "presenter").mkdir(parents=True, exist_ok=True)
    problems, smallest = [], {}
    page = open_app(visit, ckpt=NUMBERS, text=NUMBER_TEXT, present="1")
    for i, entry in enumerate(lecture.PAGES_TABLE):
        with timed(f"presenter /{entry.url_path} ({NUMBERS}) at {WINDOW['width']}x{WINDOW['height']}"):
            if i:
                errors.clear()
                warnings.clear()
                next_page(page, ORDER[i])
            assert title(page).startswith(_heading(ORDER[i]))
            no_exception(page)
            assert url_param(page, "present") == "1", f"{ORDER[i]}: presenter mode was dropped from the URL"
            assert url_param(page, "ckpt") == NUMBERS and url_param(page, "text") == NUMBER_TEXT
            larger_type(page)
            problems += page_problems(page, entry.url_path, entry.url_path, errors, warnings, smallest)
            if entry.url_path == "causes":
                patch_the_pair(page)
            wait_drawn(page)
            no_exception(page)
            problems += first_screen_problems(page, entry.url_path)
            page.screenshot(path=str(ARTIFACTS / "presenter" / f"first_screen_{entry.url_path}.png"))
            assert not errors, f"{entry.url_path}: {errors}"
            problems += learn_formula_problems(page, entry.url_path)     # folded in presenter mode: opened
            fold_learn(page)                                 # as presenter mode shows it, before Next
    assert page.locator(NEXT).count() == 0                                  # the last page
    assert page.locator("[data-testid='stMain'] a:has-text('End of the lecture')").count() == 1
    assert page.get_by_text("Presenter mode").count() >= 1
    if (ROOT / "checkpoints" / BIBLE / "model.safetensors").is_file():    # the Bible model's Translate page too
        errors.clear()
        warnings.clear()
        page.goto(f"{visit.url}/{lecture.START}?ckpt={BIBLE}&present=1&text={quote(EVERYDAY)}")
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
        problems += page_problems(page, f"{lecture.START} ({BIBLE})", lecture.START, errors, warnings, smallest)
    with open(ARTIFACTS / "presenter_fonts.log", "a") as log:
        log.write(f"smallest text in presenter mode at {WINDOW['width']}x{WINDOW['height']} (px):\n")
        for path, s in smallest.items():
            log.write(f"  {path:30s} {s['px']:5.1f}  {'svg' if s['svg'] else 'html'}  "
                      f"{s['key'] or '-'}: {s['text']!r}\n")
    assert len(smallest) >= len(lecture.PAGES_TABLE)
    assert not problems, "presenter mode at 1024x768:\n" + "\n".join(problems)
    visit.assert_offline_and_quiet()


# ---- each page by its URL: the result on the first screen, nothing past the right edge --------------------
# Each lecture page's main figure: a CSS selector, the first match in the page (the Train page shows a job's
# curves once a job ran, else the new job's planned learning rate). Written out here, not read from the pages.
MAIN = {
    "translate": ".st-key-translation",
    "architecture": ".st-key-arch_diagram",
    "positions": ".st-key-pe_learned, .st-key-pe_heatmap",
    "attention": ".st-key-attn_grid",
    "layers": "[data-testid='stDataFrame']",                 # the DecoderLens table: a translation per layer
    "causes": ".st-key-causes_encoder",
    "features": None,                                       # a layer's dictionary first (a job of minutes)
    "graphs": None,                                         # every layer's dictionary first, then a graph job
    "heads": None,                                          # a head-lab job's figures (minutes)
    "contributions": ".st-key-contrib_share_bars",
    "alignment": ".st-key-align_links",
    "search": None,                                         # a beam-size study's figures (minutes)
    "beam": ".st-key-beam_tree",
    "training_vs_inference": ".st-key-tvi_forced_rows",
    "schedule": ".st-key-sc_curves",
    "train": ".st-key-tr_curves, .st-key-tr_planned",
    "checkpoints": "[data-testid='stDataFrame']",            # every checkpoint, the first tab
}
SHOWN_PX = 200                  # of the main figure on the first screen at least: its top alone may be the last line
# Where the main figure is, and everything that runs past the window's right edge or is cut at its own.
PLACES = """selector => {
  const main = document.querySelector("[data-testid='stMain']");
  main.scrollTo(0, 0);
  const edge = document.documentElement.clientWidth;
  const seen = el => el.checkVisibility({visibilityProperty: true, opacityProperty: true});
  const name = el => { const h = el.closest("[class*='st-key-']");
    return (el.getAttribute('data-testid') || el.className) + (h ? ' ' + [...h.classList].find(c => c.startsWith('st-key-')) : ''); };
  const found = selector ? main.querySelector(selector) : null, box = found && found.getBoundingClientRect();
  const problems = [];
  for (const el of main.querySelectorAll("[data-testid='stPlotlyChart'], [data-testid='stDataFrame'], [data-testid='stTable']")) {
    const b = el.getBoundingClientRect();
    if (seen(el) && b.right > edge + 0.5) problems.push(`${name(el)} ends at ${Math.round(b.right)} px, past the window's ${edge}`);
  }
  for (const el of main.querySelectorAll("[data-testid='stDataFrame'] .dvn-scroller"))
    if (seen(el) && el.scrollWidth > el.clientWidth + 1)
      problems.push(`${name(el.closest("[data-testid='stDataFrame']"))}: columns ${el.scrollWidth} px wide in ${el.clientWidth} px`);
  for (const el of main.querySelectorAll("[data-testid='stSelectbox'] input"))
    if (seen(el) && el.scrollWidth > el.clientWidth + 1)
      problems.push(`${name(el.closest("[data-testid='stSelectbox']"))}: "${el.value}" cut (${el.scrollWidth} px in ${el.clientWidth})`);
  for (const el of main.querySelectorAll(".katex-display"))
    if (seen(el) && el.scrollWidth > el.clientWidth + 1)
      problems.push(`a formula ${el.scrollWidth} px wide in ${el.clientWidth} px`);
  return {main: box && {top: box.top, height: box.height}, problems};
}"""
TABLES_LOADED = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stDataFrame']")]
  .every(t => !t.checkVisibility() || t.querySelector('.dvn-scroller'))"""


def first_screen_problems(page, path: str) -> list[str]:
    """PLACES's problems on the page now, and where its main figure is if not SHOWN_PX of it on the first screen."""
    page.wait_for_function(TABLES_LOADED, timeout=LONG)             # a table's canvas arrives after the run
    found = page.evaluate(PLACES, MAIN[path])
    problems = [f"{path}: {p}" for p in found["problems"]]
    if MAIN[path] is not None:
        where = found["main"]
        if where is None:
            problems.append(f"{path}: its main figure ({MAIN[path]}) is not on the page")
        elif where["top"] + min(where["height"], SHOWN_PX) > WINDOW["height"]:
            problems.append(f"{path}: its main figure ({MAIN[path]}) starts at {where['top']:.0f} px, "
                            f"{min(where['height'], SHOWN_PX):.0f} px of it not on the first {WINDOW['height']} px")
    return problems


def patch_the_pair(page) -> None:
    """The Causes page's grids: its button pressed (a server that already holds the pair's grids shows them)."""
    start, grids = page.locator(".st-key-causes_start button"), page.locator(".st-key-causes_encoder .js-plotly-plot")
    start.or_(grids).first.wait_for(timeout=LONG)
    if start.count():
        start.click()
    grids.first.wait_for(timeout=LONG)
    idle(page)
