"""Drive the app like a user does: a `streamlit run` subprocess and Debian's headless Chromium.

Shared by the app benchmark (benchmarks/app.py) and the browser tests (tests/browser/), so
both start the server and the browser the same way. Playwright is imported lazily: importing this
module needs neither Playwright nor Chromium.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator
from urllib.parse import urlsplit

from explorer.files.places import REPO_ROOT as ROOT        # where `streamlit run app.py` starts
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")   # Debian's; $CHROMIUM points elsewhere
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]
LOCAL_HOSTS = ("127.0.0.1", "localhost")
APP_IDLE = "[data-testid='stApp'][data-test-script-state='notRunning'][data-test-connection-state='CONNECTED']"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def streamlit_command(script: str | Path, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
            "--server.port", str(port), "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false"]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
            return reply.read().decode().strip() == "ok"
    except OSError:
        return False


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    started: float              # time.perf_counter() just before the process was created
    log: Path | None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:] if self.log else ""
        except OSError:
            return ""


def wait_healthy(server: Server, timeout: float) -> float:
    """Seconds from process start until /_stcore/health says ok; RuntimeError if it dies or times out."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {server.proc.returncode}:\n{server.log_tail()}")
        if healthy(server.url):
            return time.perf_counter() - server.started
        time.sleep(0.05)
    raise RuntimeError(f"streamlit did not become healthy in {timeout:.0f} s:\n{server.log_tail()}")


@contextlib.contextmanager
def streamlit_server(script: str | Path = "app.py", *, env: dict | None = None, log: Path | None = None,
                     wait: float | None = 180.0, cwd: Path = ROOT) -> Iterator[Server]:
    """Start `streamlit run script` on a free localhost port; always terminate it on exit.

    wait=None returns right after the process starts (the caller times the cold start itself).
    """
    port = free_port()
    out: IO | int = subprocess.DEVNULL
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "wb")
    started = time.perf_counter()
    proc = subprocess.Popen(streamlit_command(script, port), cwd=cwd, env={**os.environ, **(env or {})},
                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}", proc, started, log)
    try:
        if wait is not None:
            wait_healthy(server, wait)
        yield server
    finally:
        stop_process(proc)
        if out is not subprocess.DEVNULL:
            out.close()


def stop_process(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds: only this process (jobs it launched live on)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used so far; 0.0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def chromium_problem() -> str | None:
    """Why the browser cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as err:
        return f"playwright cannot be imported ({err}); pip install playwright"
    return None


# No host name but this machine's resolves: a request to any other host fails in the browser itself, with
# no Python handler in its path (page.route, block_external's way, turns the browser's HTTP cache off and
# sends every request through the test process: a page opened again took 4.0 s instead of 2.7 s).
LOCAL_ONLY = "--host-resolver-rules=MAP * ~NOTFOUND, " + ", ".join(f"EXCLUDE {host}" for host in LOCAL_HOSTS)


def launch_chromium(playwright, local_only: bool = False):
    """Chromium headless; `local_only`: resolving no host name but this machine's (LOCAL_ONLY)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + [LOCAL_ONLY] * local_only)


def is_external(url: str) -> bool:
    """A request leaving this machine (data:, blob:, about: and localhost stay)."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome", "chrome-extension", "devtools"):
        return False
    return (parts.hostname or "") not in LOCAL_HOSTS


def block_external(target, record: list[str]) -> None:
    """Abort, and record, every request that a page (or context) `target`, or any of its frames,
    makes to another host."""
    def handler(route):
        url = route.request.url
        if is_external(url):
            record.append(url)
            route.abort()
        else:
            route.continue_()
    target.route("**/*", handler)


def wait_idle(page, timeout: float = 60.0) -> None:
    """Until the script run has ended (call after the expected new content is on screen)."""
    page.wait_for_selector(APP_IDLE, timeout=timeout * 1000, state="attached")


# Set window.__ranAgain once the app's script state reads "running" (or did, between two looks: the
# observer's records keep each old value). Armed before the act, once the run before it has ended, so
# that only a run after the act sets it.
WATCH_RUN = """() => { window.__ranAgain = false; const app = document.querySelector("[data-testid='stApp']");
  const seen = () => app.getAttribute('data-test-script-state') === 'running';
  const watch = new MutationObserver(records => {
    if (seen() || records.some(r => r.oldValue === 'running')) { window.__ranAgain = true; watch.disconnect(); } });
  watch.observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']}); }"""


def rerun(page, act, timeout: float = 60.0, started: str = "() => window.__ranAgain === true", arg=None) -> None:
    """Do `act()` (a click, a typed value and Enter), which makes the app run its script again, and wait
    until that run has ended. wait_idle alone right after an act can pass in the moment before the run
    begins (the state still reads notRunning for some tens of ms). `started`: a JS function (of `arg`) true
    once the act's run has begun or its result is on screen; by default the watched run. An act that
    starts no run and meets no `started` waits out `timeout`."""
    wait_idle(page, timeout)
    page.evaluate(WATCH_RUN)
    act()
    page.wait_for_function(started, arg=arg, timeout=timeout * 1000)
    wait_idle(page, timeout)
