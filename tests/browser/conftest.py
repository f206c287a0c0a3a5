"""One `streamlit run app.py` and one headless Chromium for all browser tests (both are slow to start).

The server runs with EXPLORER_RUNS_DIR in a temporary folder, so training jobs started by the tests
never touch runs/; it lists checkpoints/, then `more_checkpoints` (a folder empty unless a test fills
it), then that runs folder. Each test gets a fresh page (its own Streamlit session) that aborts, and records,
any request to a host other than 127.0.0.1 (the app must work with no internet), and records every
JavaScript dialog (an alert would mean that text typed by a user ran as script). Screenshots go to
test-artifacts/browser/. Without /usr/bin/chromium or Playwright the tests skip, saying why.

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
SERVER_LOG = ARTIFACTS / "streamlit.log"     # a copy of this session's server log, once the server stopped
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
        chromium = driver.launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def context(browser):
    """One 1400x900 browser context for all tests: its HTTP cache keeps the app's scripts (plotly.js
    alone is 4.7 MB) between pages. Each test still gets its own page, so its own Streamlit session."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
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


@pytest.fixture
def visit(context, app_url, request):
    """A fresh page on the app (external requests aborted and recorded); screenshot saved after the test."""
    page = context.new_page()
    v = Visit(page, app_url)
    driver.block_external(page, v.external)
    page.on("request", lambda r: v.requests.append(r.url))

    def on_dialog(dialog):
        v.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()
    page.on("dialog", on_dialog)
    try:
        with timed(f"== {request.node.name}"):
            yield v
    finally:
        try:
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), timeout=20_000)
        except Exception:  # noqa: BLE001 - a screenshot is a bonus, never the failure
            pass
        page.close()
    fail_on_tracebacks(f"during {request.node.name}")
