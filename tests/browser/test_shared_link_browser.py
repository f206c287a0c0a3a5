"""A shared link in a real browser: /translate answers, and an Attention link with greedy decoding, a
Show quantity and ablated heads reopens, in a fresh session, with those settings in the widgets and
the same output text (computed independently with the library)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from browser_support import LONG, NUMBERS, _model, idle, no_exception, open_app, reopen_in_a_fresh_session, squash, timed

TEXT = "three hundred and twenty one"
ABLATE = "cross.1.1,decoder.2.2"                   # decoder layer 2 head 2 changes this sentence's translation
HEADS = [("cross", 0, 0), ("decoder", 1, 1)]
SHOW = "Scores QKᵀ/√dₖ (before softmax)"


def library(ablate=()) -> str:
    from explorer.config import DecodeConfig
    from explorer.decoding import translate

    ckpt = _model(NUMBERS)
    return squash(translate(ckpt.model, ckpt.tokenizer, TEXT, DecodeConfig(strategy="greedy"), ablate=list(ablate)).text)


def line(page, prefix: str) -> str:
    """The text after `prefix` in the paragraph that starts with it, once it is drawn."""
    with timed(f"text {prefix!r}"):
        page.wait_for_function("p => [...document.querySelectorAll('p')].some(e => e.innerText.startsWith(p))",
                               arg=prefix, timeout=LONG)
    found = [t for t in page.locator("p").all_inner_texts() if t.startswith(prefix)]
    return squash(found[0][len(prefix):])


def view_of(page) -> dict:
    """What a user sees of the shared settings: the widgets' shown values and the two translations."""
    translation, ablated = line(page, "Translation (greedy):"), line(page, "Without those heads:")
    with timed("the ablated heads drawn"):
        page.wait_for_function("() => { const e = document.querySelector('.st-key-ablate_pick');"
                               " return e && / L\\d+ H\\d+/.test(e.innerText); }", timeout=LONG)
    idle(page)
    no_exception(page)
    assert page.get_by_text("Page not found").count() == 0
    return {"show": page.locator(".st-key-attn_quantity input").input_value(),
            "heads": squash(page.locator(".st-key-ablate_pick").inner_text()),
            "translation": translation, "ablated": ablated}


def test_a_shared_link_reopens_the_same_view(visit, context):
    page = open_app(visit, "translate", ckpt=NUMBERS, text=TEXT)            # the landing page by its own path
    assert page.get_by_text("Page not found").count() == 0
    assert "Translate" in page.locator("h1").all_inner_texts()
    assert squash(page.locator(".st-key-translation h4").inner_text())               # it translated

    page = open_app(visit, "attention", ckpt=NUMBERS, text=TEXT, dec="greedy", show="scores", ablate=ABLATE,
                    view="Head ablation")
    first = view_of(page)
    plain, ablated = library(), library(HEADS)
    assert plain != ablated                                             # the ablation shows on screen
    assert first["translation"] == plain and first["ablated"] == ablated
    assert SHOW in first["show"]
    assert "cross L1 H1" in first["heads"] and "decoder L2 H2" in first["heads"]
    link = page.url
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert (query["dec"], query["show"], query["ablate"]) == ("greedy", "scores", ABLATE)

    fresh = context.new_page()                                          # another session, as a student opens it
    try:
        with timed("open the shared link"):
            fresh.goto(link)
            fresh.wait_for_selector("h1", timeout=LONG)
        assert view_of(fresh) == first
    finally:
        fresh.close()
    visit.assert_offline_and_quiet()


def url_query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def test_a_links_view_is_clamped_written_back_and_tidied(visit, context):
    """The new URL keys in a real browser (the same server as above): a page's own controls come from a
    link, a value out of range comes back clamped in the address bar, a key no page reads is dropped, the
    decoding settings are clamped on any page, and presenter mode survives following Next."""
    cfg = _model(NUMBERS).config
    page = open_app(visit, "beam", ckpt=NUMBERS, text=TEXT, size=99, step=2, mark=1, junk="<b>x</b>")
    idle(page)
    no_exception(page)
    query = url_query(page)
    assert (query["size"], query["step"], query["mark"]) == ("12", "2", "1") and "junk" not in query
    link = page.url
    fresh = context.new_page()                                          # the cleaned link, in another session
    try:
        with timed("open the beam link"):
            fresh.goto(link)
            fresh.wait_for_selector("h1", timeout=LONG)
            idle(fresh)
        fresh.wait_for_function("() => document.body.innerText.includes('· beam 12 ·')", timeout=LONG)
        fresh.wait_for_function("() => document.body.innerText.includes('Candidates ranked at step 2')",
                                timeout=LONG)                                      # the search and step shown
        assert url_query(fresh)["size"] == "12"
    finally:
        fresh.close()

    page = open_app(visit, "attention", ckpt=NUMBERS, text=TEXT, beam=100000, layer=999, head=-5, stray=1)
    line(page, "Translation (beam):")
    idle(page)
    query = url_query(page)
    assert (query["beam"], query["layer"], query["head"]) == ("16", str(cfg.n_decoder_layers), "1")
    assert "stray" not in query

    page = open_app(visit, "schedule", warmup=999999, d=256, eps="0.3", nonsense=1)
    query = url_query(page)
    assert (query["warmup"], query["d"], query["eps"]) == ("20000", "256", "0.3") and "nonsense" not in query

    page = open_app(visit, "positions", ckpt=NUMBERS, text=TEXT, present=1, n=99999)
    assert url_query(page)["n"] == str(cfg.max_len)
    with timed("follow Next"):
        page.locator(".st-key-lecture_footer a").last.click()
        page.wait_for_function("() => location.pathname.endsWith('/attention')", timeout=LONG)
        idle(page)
    assert url_query(page).get("present") == "1" and "n" not in url_query(page)
    visit.assert_offline_and_quiet()


def test_a_computed_search_curves_link_reopens_it(visit, context):
    """Search's beam curve with exact search, computed by its button; the page's link (exact search's
    sentences and seconds in it) opened in a fresh session shows the curve, not "Not computed yet", and
    offers no start button. (Alignment's scorecard and the Causes grids are reopened the same way in
    test_figures_draw_browser and test_layers_browser, after the tests that compute them.)"""
    page = open_app(visit, "search", ckpt=NUMBERS, n=2, beams="1,2", penalties="none", exact=1, exact_n=1, exact_s=2)
    start, curve = page.locator(".st-key-search_start button"), page.locator(".st-key-search_curve .js-plotly-plot")
    with timed("search: beams 1 and 2 over 2 sentences, exact search on 1"):
        start.or_(curve).first.wait_for(timeout=LONG)
        if start.count():                       # a server that already holds this curve shows it at once
            start.click()
        curve.wait_for(timeout=LONG)
        idle(page)
    no_exception(page)
    link = page.url
    assert (url_query(page)["exact_n"], url_query(page)["exact_s"]) == ("1", "2")
    query = reopen_in_a_fresh_session(context, link, ".st-key-search_curve .js-plotly-plot",
                                      absent=(".st-key-search_start",))
    assert (query["exact_n"], query["exact_s"], query["n"]) == ("1", "2", "2")
    visit.assert_offline_and_quiet()
