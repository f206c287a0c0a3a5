"""The app in a real browser (headless Chromium, no internet): translate, every page, the embedded
attention views, and HTML typed as input running nothing.

Expected translations are computed with the library (explorer.decoding.translate with the app's
starting settings), so the tests hold whatever checkpoint is shipped; numbers-en-de is near perfect
and is also checked against the German words themselves.
"""
from __future__ import annotations

import re

import pytest
from browser_support import (ARTIFACTS, BIBLE, LONG, NUMBERS, frames_evaluate, idle, library_translation, no_exception,
                             open_app, open_dropdown, sidebar_to, squash, timed, translation_on_screen, type_sentence,
                             url_param, wait_plotly, wait_translation)
from test_figures_draw_browser import problems_on, watch_console
from webapp import lecture

NUMBER_TEXT = "three hundred and twenty one"
BIBLE_TEXT = "En el principio creó Dios los cielos y la tierra."
PAYLOAD = "<img src=x onerror=alert(1)>"
# In every frame: alert/confirm/prompt raise a flag before anything else runs (the dialog itself is also recorded).
FLAG_SCRIPT = """
window.__xss = false;
for (const name of ['alert', 'confirm', 'prompt']) {
  const original = window[name];
  window[name] = function (...args) { window.__xss = true; return original.apply(this, args); };
}
"""
FRAME_REPORT = """() => ({url: location.href, flag: window.__xss,
  imgs: document.querySelectorAll('img[src="x"]').length,
  handlers: document.querySelectorAll('[onerror]').length})"""


def translate_page_shows(page, name: str, text: str) -> str:
    """Type `text` on the Translate page of checkpoint `name`; the translation shown, once it is the library's."""
    src = "en → de" if name == NUMBERS else "es → en"
    type_sentence(page, f"Sentence to translate ({src})", text)
    expected = library_translation(name, text)
    return wait_translation(page, expected if expected.strip() else "(empty output)")


def test_translate_numbers_exactly(visit):
    page = open_app(visit, ckpt=NUMBERS)
    translation_on_screen(page)                                   # the first test example's, at start
    shown = translate_page_shows(page, NUMBERS, NUMBER_TEXT)
    assert shown == squash(library_translation(NUMBERS, NUMBER_TEXT))
    assert shown == "drei hundert ein und zwanzig"                # the model is near perfect on this task
    assert "text=three+hundred+and+twenty+one" in page.url         # the URL carries the sentence
    assert wait_plotly(page, "token_probs") > 0                    # per-token probabilities drew
    no_exception(page)
    visit.assert_offline_and_quiet()


def test_translate_bible_sentence(visit):
    page = open_app(visit, ckpt=BIBLE)
    first = translation_on_screen(page)
    assert first and first != "(empty output)"
    shown = translate_page_shows(page, BIBLE, BIBLE_TEXT)
    expected = squash(library_translation(BIBLE, BIBLE_TEXT))
    assert expected, "the Bible model translated the sentence to nothing"
    assert shown == expected
    wait_plotly(page, "token_probs")
    no_exception(page)
    visit.assert_offline_and_quiet()


# Beyond every figure drawing (test_figures_draw_browser's checks, run on each page): a chart key that must
# draw (None: a table instead), and text that must be on the page, by sidebar title.
PAGES = {
    "Architecture": ("arch_diagram", None),
    "Attention": ("attn_grid", "drei hundert ein und zwanzig"),
    "Positional encoding": ("pe_heatmap", None),
    "Beam search": ("beam_tree", "drei hundert ein und zwanzig"),
    "Training vs inference": ("tvi_forced_rows", None),
    "Train": ("tr_planned", None),
    "Schedule": ("sc_curves", None),
    "Checkpoints": (None, None),
    "Translate": ("token_probs", "drei hundert ein und zwanzig"),
}


def test_every_page_from_the_sidebar_draws_every_figure(visit):
    """Every page of the page table, reached from the sidebar as a user would (one session, the numbers
    model, its sentence typed once): no traceback, every figure drawn with no console error (the checks of
    test_figures_draw_browser, which opens each page fresh by URL on the Bible model), the checkpoint kept."""
    page = open_app(visit, ckpt=NUMBERS)
    errors = watch_console(page)
    translate_page_shows(page, NUMBERS, NUMBER_TEXT)
    titles = [entry.title for entry in lecture.PAGES_TABLE]
    assert set(PAGES) <= set(titles), f"pages read from the page table: {titles}"
    problems = []
    for entry in [*lecture.PAGES_TABLE[1:], lecture.PAGES_TABLE[0]]:       # the landing page last: typed before
        errors.clear()
        sidebar_to(page, entry.title)
        no_exception(page)
        chart, text = PAGES.get(entry.title, (False, None))
        if chart:
            assert wait_plotly(page, chart) >= 1, f"{entry.title}: the chart {chart} drew no SVG"
        elif chart is None:
            page.wait_for_selector("[data-testid='stDataFrame']")
        if text:
            assert text in squash(page.locator("[data-testid='stMain']").inner_text()), f"{entry.title}: no '{text}'"
        assert f"ckpt={NUMBERS}" in page.url                       # the checkpoint stays chosen across pages
        page.screenshot(path=str(ARTIFACTS / f"page_{entry.url_path}.png"))
        problems += problems_on(page, entry.url_path, errors)        # after: it opens each tab in turn
    assert not problems, "figures that did not draw, or errors:\n" + "\n".join(problems)
    visit.assert_offline_and_quiet()


def open_bertviz(page) -> list:
    """Open the Attention page's bertviz tab and build the views; the two embedded frames, drawn."""
    with timed("bertviz views drawn"):
        page.get_by_role("tab", name="bertviz").click()
        page.get_by_text("Build the interactive views").click()
        page.wait_for_function("() => document.querySelectorAll('iframe').length >= 2", timeout=LONG)
        idle(page)
        frames = [f for f in page.frames if f != page.main_frame]
        assert len(frames) >= 2, f"expected the head view and the model view, got {len(frames)} frames"
        for frame in frames:
            frame.wait_for_function("() => document.querySelectorAll('svg *').length > 20", timeout=LONG)
    return frames


def test_attention_views_draw_offline(visit):
    page = open_app(visit, "attention", ckpt=NUMBERS, text=NUMBER_TEXT)
    wait_plotly(page, "attn_zoom")
    # a click on a head of the all-heads grid zooms on it: curve 2 is layer 1, head 2 (layers down, heads
    # across); the page opens on the last layer's first head, so the URL and the zoom's title change
    wait_plotly(page, "attn_grid")
    assert (url_param(page, "layer"), url_param(page, "head")) == ("2", "1")
    page.locator(".st-key-attn_grid .nsewdrag[data-subplot='x2y2']").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '2'", timeout=LONG)
    assert (url_param(page, "layer"), url_param(page, "head")) == ("1", "2")
    page.wait_for_function("() => [...document.querySelectorAll('.st-key-attn_zoom .gtitle')]"
                           ".some(t => t.textContent.startsWith('Layer 1, head 2'))", timeout=LONG)
    no_exception(page)
    frames = open_bertviz(page)
    texts = [f.evaluate("() => document.body.innerText") for f in frames]
    head_view = next(t for t in texts if "Layer" in t)
    for token in ("three", "hundred", "twenty", "one", "drei", "zwanzig"):
        assert token in head_view, f"token {token!r} not drawn in the head view"
    assert any("Heads" in t and "Layers" in t for t in texts), "the model view did not draw its grid"
    # the head view draws one attention line per (query, key) pair of the selected heads
    lines = frames[texts.index(head_view)].evaluate("() => document.querySelectorAll('svg line, svg path').length")
    assert lines > 0
    page.locator("iframe").first.screenshot(path=str(ARTIFACTS / "bertviz_head_view.png"))
    visit.assert_offline_and_quiet()
    # The check can fail: an external fetch from the page is caught, aborted and recorded.
    page.evaluate("() => fetch('https://cdn.example.invalid/lib.js').then(() => 'loaded', () => 'blocked')")
    assert visit.external == ["https://cdn.example.invalid/lib.js"]


@pytest.mark.own_page                               # its init script would stay in the shared tab
def test_html_in_the_input_runs_nothing(visit):
    visit.page.add_init_script(FLAG_SCRIPT)            # runs in the page and in every frame
    page = open_app(visit, ckpt=BIBLE)
    translation_on_screen(page)
    translate_page_shows(page, BIBLE, PAYLOAD)
    assert page.get_by_label("Sentence to translate (es → en)").input_value() == PAYLOAD   # shown as text
    sidebar_to(page, "Attention")
    wait_plotly(page, "attn_zoom")
    open_bertviz(page)
    sidebar_to(page, "Beam search")
    wait_plotly(page, "beam_tree")
    sidebar_to(page, "Checkpoints")
    no_exception(page)
    reports = frames_evaluate(page, FRAME_REPORT)
    assert len(reports) >= 1
    for report in reports:
        assert isinstance(report, dict), report
        assert report["flag"] is False, f"a dialog function ran in {report['url']}"   # False: the flag is set up
        assert report["imgs"] == 0 and report["handlers"] == 0, f"HTML from the input became elements: {report}"
    assert not [u for u in visit.requests if re.search(r"/x(\?|$)", u)], "an <img src=x> was loaded"
    visit.assert_offline_and_quiet()
    # The checks can fail: a real alert is seen by both the dialog handler and the flag.
    page.evaluate("() => alert('control')")
    assert visit.dialogs == ["alert: control"] and page.evaluate("() => window.__xss") is True


def test_a_verse_picked_then_another_model_then_typing(visit):
    """A test verse picked from the list, then the numbers model, then a typed sentence: the browser
    still holds the first model's picker label, which must not reach the page as a choice (it did:
    a traceback); the picker is the new model's, empty, and the typed sentence is translated."""
    from browser_support import pick_checkpoint, rerun

    page = open_app(visit, ckpt=BIBLE)
    translation_on_screen(page)
    idle(page)
    # by its label: while the page reruns, the first select box on it can be another (the translation's
    # "Where did it learn this?" picker was clicked once so, and its word picked)
    examples = page.locator("[data-testid='stMain'] [data-testid='stSelectbox']",
                            has_text="Example from the held-out test set").first
    verses = open_dropdown(page, examples)
    rerun(page, lambda: verses.nth(1).click())                    # its run over before the sidebar's picker
    assert "·" in examples.locator("input").input_value()                     # a verse is shown as picked
    pick_checkpoint(page, NUMBERS)
    no_exception(page)
    assert examples.locator("input").input_value() == ""                      # the numbers model's picker, empty
    shown = translate_page_shows(page, NUMBERS, "twenty one")
    assert shown == squash(library_translation(NUMBERS, "twenty one"))
    no_exception(page)
    visit.assert_offline_and_quiet()
