"""The offline bertviz views in a real browser (no app server needed), on the d3 and jQuery of the
installed packages (bertviz's views were written for jQuery 2.0; they run on 3.7.1 slim)."""
from __future__ import annotations

from webapp import bertviz_offline as bv
from browser_support import LONG
from support.bertviz_inputs import HOSTILE, TGT, stacks


def test_bertviz_draws_in_chromium_without_network(browser):
    """Both bertviz views, fed hostile tokens, draw with every request refused and run no script;
    their menus (attention kind, layer) redraw them, with no JavaScript error.

    Uses the session's browser: a second sync Playwright in one process is refused."""
    context = browser.new_context()
    page = context.new_page()
    requests, dialogs, errors = [], [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda route: route.abort())                         # no network at all
    try:
        for view in ("head", "model"):
            html, _ = bv.render(view, stacks(), HOSTILE, TGT)
            page.set_content(html)
            page.wait_for_function("document.querySelectorAll('svg text').length > 0", timeout=LONG)
            assert page.evaluate("[window.d3.version, window.jQuery.fn.jquery.split(' ')[0]]") == ["5.7.0", "3.7.1"]
            assert page.evaluate("window.PWNED") is None
            assert page.locator("img").count() == 0
            if view == "head":
                texts = page.locator("svg text").all_text_contents()
                assert HOSTILE[0] in texts                                  # drawn as text, not as markup
                assert page.locator("#layer option").count() == 2
                page.select_option("#layer", "2")                           # jQuery's .on('change'); 1-based
                page.select_option("#filter", "2")                          # Cross: target rows, source keys
                page.wait_for_function("Array.from(document.querySelectorAll('svg text'))"
                                       f".some(t => t.textContent === {TGT[1]!r}.replace('▁', ' '))",
                                       timeout=LONG)
                texts = page.locator("svg text").all_text_contents()
                assert HOSTILE[0] in texts and " <b>" in texts
            else:
                thumbnails = page.locator("rect.attn_background")
                assert thumbnails.count() == 2 * 3                          # layers x heads
                page.mouse.click(*centre(thumbnails.first.bounding_box()))  # d3's click: the detail opens
                page.wait_for_selector("text.detail, .detail text", timeout=LONG)
                assert HOSTILE[0] in page.locator("svg text").all_text_contents()
                page.select_option("#filter", "1")                          # Decoder, drawn anew
                assert thumbnails.count() == 2 * 3
                page.mouse.click(*centre(thumbnails.last.bounding_box()))
                page.wait_for_function("Array.from(document.querySelectorAll('svg text'))"
                                       ".some(t => t.textContent === ' <b>')", timeout=LONG)
    finally:
        context.close()
    assert not errors and not dialogs
    assert not [u for u in requests if not u.startswith(("about:", "data:"))]


def centre(box: dict) -> tuple[float, float]:
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
