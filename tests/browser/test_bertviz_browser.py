"""The offline bertviz views in a real browser (no app server needed)."""
from __future__ import annotations

from explorer.ui import bertviz_offline as bv
from test_bertviz_offline import HOSTILE, TGT, stacks


def test_bertviz_draws_in_chromium_without_network(browser):
    """Both bertviz views, fed hostile tokens, draw with every request refused and run no script.

    Uses the session's browser: a second sync Playwright in one process is refused."""
    context = browser.new_context()
    page = context.new_page()
    requests, dialogs = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda route: route.abort())                         # no network at all
    try:
        for view in ("head", "model"):
            html, _ = bv.render(view, stacks(), HOSTILE, TGT)
            page.set_content(html)
            page.wait_for_function("document.querySelectorAll('svg text').length > 0", timeout=15000)
            assert page.evaluate("window.PWNED") is None
            assert page.locator("img").count() == 0
            if view == "head":
                texts = page.locator("svg text").all_text_contents()
                assert HOSTILE[0] in texts                                  # drawn as text, not as markup
    finally:
        context.close()
    assert not dialogs and not [u for u in requests if not u.startswith(("about:", "data:"))]

