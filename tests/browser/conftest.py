"""One `streamlit run app.py` and one headless Chromium for all browser tests (both are slow to start).

The server runs with EXPLORER_RUNS_DIR in a temporary folder, so training jobs started by the tests
never touch runs/; it lists checkpoints/, then `more_checkpoints` (a folder empty unless a test fills
it), then that runs folder. Each test gets a fresh page (its own Streamlit session) that aborts, and records,
any request to a host other than 127.0.0.1 (the app must work with no internet), and records every
JavaScript dialog (an alert would mean that text typed by a user ran as script). Screenshots go to
test-artifacts/browser/. Without /usr/bin/chromium or Playwright the tests skip, saying why.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from benchmarks import browser as driver

import browser_support
from browser_support import ARTIFACTS, ROOT, timed
PROBLEM = driver.chromium_problem()


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
def app_url(runs_dir, more_checkpoints) -> str:
    """The URL of a `streamlit run app.py` started for this session; always terminated after."""
    if PROBLEM:
        pytest.skip(PROBLEM)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    roots = os.pathsep.join(str(p) for p in (ROOT / "checkpoints", more_checkpoints, runs_dir))
    env = {"EXPLORER_RUNS_DIR": str(runs_dir), "EXPLORER_CHECKPOINT_ROOTS": roots, "OMP_NUM_THREADS": "1",
           "EXPLORER_MAX_JOBS": "1"}
    with contextlib.ExitStack() as stack:
        with timed("streamlit run app.py: healthy"):
            server = stack.enter_context(driver.streamlit_server("app.py", env=env, log=ARTIFACTS / "streamlit.log",
                                                                 wait=240))
        browser_support.SERVER["pid"] = server.proc.pid
        yield server.url


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
    ctx.set_default_timeout(60_000)
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
