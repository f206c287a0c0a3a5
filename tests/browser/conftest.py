"""One `streamlit run app.py` and one headless Chromium for all browser tests (both are slow to start).

The server runs with EXPLORER_RUNS_DIR in a temporary folder, so training jobs started by the tests
never touch runs/; it lists checkpoints/, then `more_checkpoints` (a folder empty unless a test fills
it), then that runs folder. Each test gets its own Streamlit session: the browser tab the tests share,
at 1400x900 again, opening the app anew (a page load is a new session; the tab is taken to about:blank
after each test, which ends the last one). One tab, not a new one per test: a page loaded again in the
same tab costs Chromium about a third of the CPU (2.7 s instead of 6.9 s a page here: its scripts, 11.5
MB, are compiled again in a new tab's renderer). What a test registers on the page (page.on) is removed
after it; a test marked `own_page` (one that adds an init script, which no tab forgets) gets a new tab.
The browser resolves no host name but 127.0.0.1's (benchmarks.browser.LOCAL_ONLY) and each test records
every request to another host (the app must work with no internet), and every JavaScript dialog (an
alert would mean that text typed by a user ran as script). Screenshots go to test-artifacts/browser/.
Without /usr/bin/chromium or Playwright the tests skip, saying why.

The server's output (stdout and stderr, test-artifacts/browser/streamlit.log) must hold no Python
traceback: a test whose time in the server logged one fails in its teardown, and what the server logs
between tests or while it stops fails the session's end. An error the app shows as a message, or a
warning Streamlit logs, is no traceback; an exception Streamlit caught and logged with its stack (a
table it had to retype for Arrow, an uncaught page exception) is.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from benchmarks import browser as driver

import browser_support
from browser_support import ARTIFACTS, LONG, ROOT, timed
PROBLEM = driver.chromium_problem()
SERVER_LOG = ARTIFACTS / "streamlit.log"
VIEWPORT = {"width": 1400, "height": 900}     # every test starts at this size (a test may change it)     # a copy of this session's server log, once the server stopped
# The server writes its log in the session's temporary folder (another test session in the same checkout
# has its own), and how far it has been checked for tracebacks.
_log = {"path": None, "offset": 0}


def tracebacks(text: str) -> list[str]:
    """Each Python traceback in a log: the line before it (the logger's message), its stack, its exception."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("Traceback (most recent call last)"):
            end = i + 1
            while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
                end += 1
            block = lines[max(0, i - 1):end + 1]
            found.append("\n".join(block if len(block) <= 24 else block[:3] + ["  ..."] + block[-16:]))
    return found


def new_server_tracebacks() -> list[str]:
    """Tracebacks the server logged since the last call."""
    if _log["path"] is None:
        return []
    try:
        with open(_log["path"], "rb") as log:
            log.seek(_log["offset"])
            data = log.read()
    except OSError:
        return []
    data = data[:data.rfind(b"\n") + 1]           # a line still being written is read next time
    _log["offset"] += len(data)
    return tracebacks(data.decode("utf-8", errors="replace"))


def fail_on_tracebacks(where: str) -> None:
    found = new_server_tracebacks()
    if found:
        pytest.fail(f"the app server logged {len(found)} traceback(s) {where} ({_log['path']}, copied to "
                    f"{SERVER_LOG} at the end):\n\n"
                    + "\n\n".join(found[:3]), pytrace=False)


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser_runs")


@pytest.fixture(scope="session")
def more_checkpoints(tmp_path_factory) -> Path:
    """A folder the server lists after checkpoints/ and before the runs directory, empty unless a
    test puts checkpoints there (to see the app with more of them than it shows at once)."""
    return tmp_path_factory.mktemp("a_more_checkpoints")


@pytest.fixture(scope="session")
def app_url(runs_dir, more_checkpoints, tmp_path_factory) -> str:
    """The URL of a `streamlit run app.py` started for this session; always terminated after."""
    if PROBLEM:
        pytest.skip(PROBLEM)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    roots = os.pathsep.join(str(p) for p in (ROOT / "checkpoints", more_checkpoints, runs_dir))
    env = {"EXPLORER_RUNS_DIR": str(runs_dir), "EXPLORER_CHECKPOINT_ROOTS": roots, "OMP_NUM_THREADS": "1",
           "EXPLORER_MAX_JOBS": "1"}
    _log.update(path=tmp_path_factory.mktemp("server") / "streamlit.log", offset=0)
    with contextlib.ExitStack() as stack:
        with timed("streamlit run app.py: healthy"):
            server = stack.enter_context(driver.streamlit_server("app.py", env=env, log=_log["path"], wait=240))
        browser_support.SERVER["pid"] = server.proc.pid
        yield server.url
    with contextlib.suppress(OSError):
        shutil.copyfile(_log["path"], SERVER_LOG)
    fail_on_tracebacks("between tests or while stopping")          # the log is complete once the server stopped


@pytest.fixture(scope="session")
def browser():
    if PROBLEM:
        pytest.skip(PROBLEM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = driver.launch_chromium(playwright, local_only=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def context(browser):
    """One 1400x900 browser context for all tests: its HTTP cache keeps the app's scripts (plotly.js
    alone is 4.7 MB) between pages."""
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(LONG)                 # a hang guard (support.waiting), never a timing goal
    yield ctx
    ctx.close()


class Visit:
    """A page plus what it did that it must not: external requests, dialogs."""

    def __init__(self, page, url: str):
        self.page, self.url = page, url
        self.external: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []

    def assert_offline_and_quiet(self) -> None:
        assert not self.external, f"the page tried to fetch external URLs: {self.external[:5]}"
        assert not self.dialogs, f"a JavaScript dialog opened (script ran): {self.dialogs}"


@pytest.fixture(scope="session")
def shared_tab(context):
    """The tab the tests share ({"page": ...}, opened by the first test that needs it)."""
    tab = {"page": None}
    yield tab
    if tab["page"] is not None and not tab["page"].is_closed():
        tab["page"].close()


@pytest.fixture
def visit(context, app_url, request, shared_tab):
    """A page on the app for this test alone (the shared tab, or a new one for `own_page`), each request to
    another host recorded; screenshot saved after the test, what it registered on the page removed."""
    own = request.node.get_closest_marker("own_page") is not None
    page = shared_tab["page"]
    if own or page is None or page.is_closed():
        page = context.new_page()
        if not own:
            shared_tab["page"] = page
    page.set_viewport_size(VIEWPORT)
    v = Visit(page, app_url)
    registered = []

    def on(event, handler):                      # page.on for this test: each listener removed after it
        registered.append((event, handler))
        type(page).on(page, event, handler)

    def on_request(r):
        v.requests.append(r.url)
        if driver.is_external(r.url):
            v.external.append(r.url)

    def on_dialog(dialog):
        v.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()
    page.on = on
    page.on("request", on_request)
    page.on("dialog", on_dialog)
    try:
        with timed(f"== {request.node.name}"):
            yield v
    finally:
        try:
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), timeout=20_000)
        except Exception:  # noqa: BLE001 - a screenshot is a bonus, never the failure
            pass
        del page.on
        for event, handler in registered:
            page.remove_listener(event, handler)
        with contextlib.suppress(Exception):     # a closed or crashed tab: the next test opens another
            page.close() if own else page.goto("about:blank")
    fail_on_tracebacks(f"during {request.node.name}")
