"""Page helpers for the browser tests: open a page, wait for a script run, read what is on screen.

Waits are explicit conditions (an element, a text, the app's script state), never sleeps: the
machine may be busy, so timeouts are generous.
"""
from __future__ import annotations

import contextlib
import functools
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

from benchmarks import browser as driver
from support.waiting import STALL_S

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
LONG = int(STALL_S * 1000)           # ms: every wait is for a condition; this bound is a hang guard, not a goal
PLOTLY = ".js-plotly-plot svg.main-svg"
NUMBERS, BIBLE = "numbers-en-de", "bible-es-en"


SERVER = {"pid": None}                # set by conftest: the app server whose CPU time is logged


def server_cpu() -> float:
    """CPU seconds the app server has used (0 when unknown): tells "the app computed" from "it waited"."""
    return driver.process_cpu(SERVER["pid"])


@contextlib.contextmanager
def timed(what: str):
    """Append how long `what` took (wall, and the server's CPU) to test-artifacts/browser/timings.log."""
    start, cpu = time.perf_counter(), server_cpu()
    try:
        yield
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with open(ARTIFACTS / "timings.log", "a") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {time.perf_counter() - start:7.2f} s wall "
                      f"{server_cpu() - cpu:6.2f} s app CPU  {what}\n")


def app_settings():
    """The decoding settings the app starts with (state.decode_settings() of a fresh session)."""
    from explorer.config import DecodeConfig

    return DecodeConfig(strategy="beam", beam_size=5, n_best=5)


@functools.lru_cache(maxsize=None)
def _model(name: str):
    import torch

    from explorer.store.checkpoint import load_checkpoint

    torch.set_num_threads(1)          # two busy cores: more threads only make everyone wait
    return load_checkpoint(ROOT / "checkpoints" / name, device="cpu")


@functools.lru_cache(maxsize=None)
def library_translation(name: str, text: str) -> str:
    """What explorer.decoding.translate gives for `text` with the app's starting settings."""
    from explorer.decoding import translate

    with timed(f"library translation ({name})"):
        ckpt = _model(name)
        return translate(ckpt.model, ckpt.tokenizer, text, app_settings()).text


def squash(text: str) -> str:
    return " ".join(str(text).split())


def idle(page, timeout: float = LONG / 1000) -> None:
    driver.wait_idle(page, timeout)


def rerun(page, act, **started) -> None:
    """`act()`, which makes the app run its script again, and the end of that run (driver.rerun)."""
    driver.rerun(page, act, LONG / 1000, **started)


# The open tab's panel holds something, or a run began after the click (driver.WATCH_RUN, armed before it).
# A lazy tab (drawn only while open) shows an empty panel for a moment after the click, while the script
# state still reads notRunning (seen: a few tens of ms); idle() alone would pass in that moment and the
# page be read before the tab ran. (An eager tab bound to the URL holds its contents at once: its rerun
# draws the same.)
TAB_STARTED = """tab => tab.getAttribute('aria-selected') === 'true' && (window.__ranAgain === true ||
  [...document.querySelectorAll("[data-testid='stMain'] [role='tabpanel']")].some(p =>
      p.id === tab.getAttribute('aria-controls') && p.querySelector("[data-testid='stElementContainer']")))"""


def open_tab(page, tab) -> None:
    """Click a tab (a locator) and wait until its contents are drawn and the script run they need ended."""
    rerun(page, tab.click, started=TAB_STARTED, arg=tab.element_handle())


def open_app(visit, path: str = "", **query):
    """Go to /path?query and wait until the page's title is drawn and its script run ended."""
    page = visit.page
    with timed(f"open /{path} {query}"):
        page.goto(f"{visit.url}/{path}" + (f"?{urlencode(query)}" if query else ""))
        page.wait_for_selector("h1", timeout=LONG)
        idle(page)
    return page


def sidebar_to(page, title: str) -> None:
    """Open a page from the sidebar navigation; wait for its heading and the end of its run."""
    with timed(f"sidebar -> {title}"):
        # the whole title, not a prefix of another one ("Train" and "Training vs inference")
        exact = re.compile(rf"(?<!\w){re.escape(title)}\s*$")
        page.locator("[data-testid='stSidebarNav'] a", has_text=exact).first.click()
        page.wait_for_function("t => [...document.querySelectorAll('h1')].some(h => h.innerText.startsWith(t))",
                               arg=_heading(title), timeout=LONG)
        idle(page)


def _heading(title: str) -> str:
    return {"Beam search": "Beam search, step by step",
            "Schedule": "Learning-rate schedule and label smoothing"}.get(title, title)


def no_exception(page) -> None:
    shown = page.locator("[data-testid='stException']")
    assert shown.count() == 0, f"a traceback is on screen: {shown.first.inner_text()[:500]}"


def wait_plotly(page, key: str) -> int:
    """Wait until the chart with widget key `key` drew its SVG; the number of SVG layers."""
    with timed(f"chart {key}"):
        page.wait_for_selector(f".st-key-{key} {PLOTLY}", timeout=LONG)
    return page.locator(f".st-key-{key} {PLOTLY}").count()


def plotly_count(page) -> int:
    return page.locator(PLOTLY).count()


def type_sentence(page, label: str, text: str) -> None:
    box = page.get_by_label(label)
    box.fill(text)
    box.press("Control+Enter")


def translation_on_screen(page, timeout: float = LONG) -> str:
    with timed("a translation on screen"):
        page.wait_for_selector(".st-key-translation h4", timeout=timeout)
    return squash(page.locator(".st-key-translation h4").inner_text())


def wait_translation(page, expected: str) -> str:
    """Wait until the Translate page shows `expected` (after a rerun ends); the text shown."""
    with timed(f"translation == {expected[:40]!r}"):
        page.wait_for_function(
            "t => { const h = document.querySelector('.st-key-translation h4');"
            " return h && h.innerText.split(/\\s+/).filter(Boolean).join(' ') === t; }",
            arg=squash(expected), timeout=LONG)
        idle(page)
    return translation_on_screen(page)


def frames_evaluate(page, script: str) -> list:
    """`script` evaluated in every frame (the page and each iframe, embedded views included)."""
    out = []
    for frame in page.frames:
        try:
            out.append(frame.evaluate(script))
        except Exception as err:  # noqa: BLE001 - a frame that went away: report, keep going
            out.append(f"error: {err}")
    return out


def pick_checkpoint(page, name: str, screenshot: str | None = None) -> list[str]:
    """Pick checkpoint `name` in the sidebar picker as a user does in a long list: type its name to
    filter the dropdown (which draws only its first dozen or so options, so reading them depends on
    what else is on disk), then click the option that is exactly `name`. Waits until the app uses
    it (the URL names it); returns the labels the filtered dropdown offered."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    picker = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first
    with timed(f"pick checkpoint {name}"):
        picker.click()
        page.keyboard.type(name)
        options = page.locator("[role='option']")
        exact = options.filter(has_text=re.compile("^" + re.escape(name) + r" \("))
        try:
            exact.first.wait_for(timeout=LONG)
        except PlaywrightTimeout:
            pass                                      # reported below, with what was offered
        labels = options.all_inner_texts()
        if screenshot:
            page.screenshot(path=str(ARTIFACTS / screenshot))
        assert exact.count() == 1, f"{name} offered {exact.count()} times; after typing it the picker offers {labels}"
        exact.click()
        page.wait_for_function("n => new URLSearchParams(location.search).get('ckpt') === n", arg=name,
                               timeout=LONG)
        idle(page)
    return labels


def open_dropdown(page, box):
    """Click a select box until its list of options is open, and return the options. A click that lands
    while Streamlit redraws the widget (just after a panel unfolds, or during a rerun) focuses the box
    without opening it, and waiting longer does not open it: the box is clicked again instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    options = page.locator("[role='option']")
    for _ in range(4):
        box.click()
        try:
            options.first.wait_for(timeout=5_000)
            return options
        except PlaywrightTimeout:
            page.keyboard.press("Escape")             # a half-open state is closed before the next click
            idle(page)
    box.click()
    options.first.wait_for(timeout=LONG)
    return options


def reopen_in_a_fresh_session(context, link: str, shown: str, absent: tuple[str, ...] = ()) -> dict:
    """Open a shared link as a colleague does (a new page: a new Streamlit session) and check that the
    computed result comes back: the `shown` selector draws, the page says nothing of "Not computed yet",
    no selector of `absent` (e.g. a start button) is there, no traceback. Returns the link's query as the
    fresh page ended with it (a page may tidy its URL)."""
    fresh = context.new_page()
    try:
        with timed(f"reopen {urlsplit(link).path} in a fresh session"):
            fresh.goto(link)
            fresh.wait_for_selector("h1", timeout=LONG)
            fresh.wait_for_selector(shown, timeout=LONG)
            idle(fresh)
        no_exception(fresh)
        assert fresh.get_by_text("Not computed yet").count() == 0, f"{link}: 'Not computed yet' in a fresh session"
        for selector in absent:
            assert fresh.locator(selector).count() == 0, f"{link}: {selector} in a fresh session"
        return {k: v[0] for k, v in parse_qs(urlsplit(fresh.url).query).items()}
    finally:
        fresh.close()


# Every visible display formula in the main area: [scrollWidth, clientWidth, its text's start].
FORMULAS = """() => [...document.querySelectorAll("[data-testid='stMain'] .katex-display")]
  .filter(e => e.checkVisibility()).map(e => [e.scrollWidth, e.clientWidth, e.textContent.slice(0, 40)])"""


def unfold_learn(page) -> None:
    """Open the page's Learn panel (folded in presenter mode), and wait for its formula."""
    summary = page.locator("[data-testid='stMain'] [data-testid='stExpander'] summary", has_text="Learn").first
    if summary.evaluate("s => !s.parentElement.open"):
        summary.click()
    page.locator("[data-testid='stMain'] .katex-display").first.wait_for(state="visible", timeout=LONG)


def fold_learn(page) -> None:
    """Fold the Learn panel again and wait until it is closed: Streamlit keeps an expander's open state
    for the element in the same place on the next page, so a panel left open would push the next page's
    figure down (the Contributions figure started at 1,053 px)."""
    summary = page.locator("[data-testid='stMain'] [data-testid='stExpander'] summary", has_text="Learn").first
    if summary.evaluate("s => s.parentElement.open"):
        summary.click()
    page.wait_for_function("""() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stExpander'] details")]
      .every(d => !d.open || !d.querySelector('summary').innerText.includes('Learn'))""", timeout=LONG)
    idle(page)


def learn_formula_problems(page, where: str) -> list[str]:
    """Unfold the page's Learn panel and name each display formula wider than its room (KaTeX draws one on
    a single line, and a wider one scrolls sideways, cut at the page's edge); the panel is left open."""
    unfold_learn(page)
    formulas = page.evaluate(FORMULAS)
    if not formulas:
        return [f"{where}: no Learn formula measured"]
    return [f"{where}: a Learn formula {wide} px wide in {room} px ({text!r}…)"
            for wide, room, text in formulas if wide > room + 1]


def url_param(page, key: str) -> str | None:
    return (parse_qs(urlsplit(page.url).query).get(key) or [None])[0]
