"""Load: N simulated students at once against one `streamlit run app.py` on 127.0.0.1.

Each student has its own session and its own sentence (a held-out Bible verse of 10-30 words from the
checkpoint's test.tsv) and follows a lesson's script:
  open      load the app ("/": Translate on the showcase sentence) until its translation has arrived
  translate type its own sentence into the Translate box (Ctrl+Enter) until its translation has arrived
  attention click "Attention" in the sidebar until the cross-attention zoom (head 1) has arrived
  head      switch the head (radio) --heads times, each until the new head's zoom has arrived
  beam      click "Beam search" until step 1's candidate table has arrived
  step      move the step slider --steps times, each until that step's table has arrived
Before each phase a student reads for --pause s, then waits for the others: the phase's first interaction
starts at the same moment for every student ("N students translating at the same moment"); the switches
after it follow with a think time (--think, +-50%).

Two clients drive the sessions:
- protocol (benchmarks/streamlit_client.py): Streamlit's own protobuf messages over its websocket, one
  thread per student. On "open" it first fetches what a browser's first visit fetches over HTTP (the
  page, scripts, the chunks for the elements drawn, fonts: recorded once from Chromium on the reference
  server, else index.html's list), and after each run the files its download buttons point at, as the
  frontend does: so it costs the server what a browser costs it. Cheap enough for N = 32 on 2 cores.
  "Visible" is the element's arrival over the websocket.
- browser (Playwright, Debian's Chromium, one browser context per student; benchmarks/browser.py):
  "visible" is the element drawn in the page. Chromium shares the machine's cores with the server, so
  only small N; at a common N the two are compared (latencies, server CPU per student, outputs).

The single-user reference comes first and is the N=1 row: on a fresh server, each student's script
alone, one student after another (protocol client, no pauses). Every later output (the translation,
the Attention page's translation line and zoom: title, axis labels, sum of squared weights; the Beam
page's best line, step heading and chosen hypothesis) is compared with that student's reference: an
output that differs is counted, and "mixed" when it equals another student's reference.

Every N gets a fresh server (empty result caches) warmed by one teacher session (the three pages on
the showcase sentence: the model loaded and the pages imported, as when a lecture starts). Server CPU
(all threads, and the main thread: the event loop) and resident memory are read from /proc/<pid> of the
streamlit process (sampled every 0.2 s). Then --churn sessions (default 200, --churn-concurrency at a
time, each: open, translate its own sentence, Attention, leave) come and go on one more fresh server:
resident memory after 10, 25, 50, 100, 150 and all of them, each read twice: --settle s after the
sessions so far have closed, and once more when they are past server.disconnectedSessionTTL (Streamlit
keeps a closed session that long for a reconnect, .streamlit/config.toml sets it; it drops them when
its storage is next touched, so one session opens and closes first). The second curve is a lesson's:
students leave over an hour, not 200 in two minutes; the first shows what the grace period holds.

Bounded: each interaction gives up after --timeout s (an error), no stage starts after --max-minutes
and a stage that runs past the bound is cut (its unrun interactions are reported). A full run takes
about 9-10 minutes on 2 cores (--no-past-ttl: 2-3 minutes less).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import browser as driver
from benchmarks.streamlit_client import ClientError, Session, plain, plain_title, plotly_fingerprint, plotly_spec
from explorer.store.run_files import RUNS_ENV, shipped_root

CHECKPOINT = "bible-es-en"
PHASES = ("open", "translate", "attention", "head", "beam", "step")
SESSION_TTL_S = float(tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml")
                                    .read_text())["server"].get("disconnectedSessionTTL", 120))
QUEUE_NOTICE = re.compile(r"(\d+) ahead of you")   # webapp.model_calls' notice while a request waits its turn
GOALS = "N=16: translate p95 < 3 s, 0 errors, 0 mixed; N=32: 0 errors; RSS after 200 sessions within 20% of after 10"


# ---- the script ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    phase: str
    seq: int          # 0 for the phase's first interaction, k for its k-th switch
    arg: int          # the head (1-based) or beam step (1-based) asked for
    synced: bool      # every student starts it at the same moment


def lesson(heads: int, steps: int, n_heads: int) -> list[Step]:
    plan = [Step("open", 0, 0, True), Step("translate", 0, 0, True), Step("attention", 0, 1, True)]
    plan += [Step("head", k, k % n_heads + 1, k == 1) for k in range(1, heads + 1)]
    plan += [Step("beam", 0, 1, True)]
    plan += [Step("step", k, k + 1, k == 1) for k in range(1, steps + 1)]
    return plan


def churn_lesson() -> list[Step]:
    return [Step("open", 0, 0, False), Step("translate", 0, 0, False), Step("attention", 0, 1, False)]


@dataclass
class Record:
    student: int
    phase: str
    seq: int
    visible: float | None = None
    settled: float | None = None
    sent: float | None = None     # seconds from the action to its message leaving for the server
    error: str | None = None
    seen: Any = None              # what the student saw (comparable text, JSON-able)
    queued: int | None = None     # most requests ahead in a queue notice the student was shown (protocol client)


def sentences(name: str, count: int) -> list[str]:
    """`count` distinct held-out verses of 10-30 words, in test.tsv order, skipping the showcase sentence."""
    from explorer.data.files import read_tsv
    from explorer.store.checkpoint import TEST_SPLIT

    path = shipped_root() / name
    pairs = read_tsv(str(path / TEST_SPLIT))
    try:
        showcase = json.loads((path / "card.json").read_text()).get("showcase", {}).get("index")
    except (OSError, ValueError, AttributeError):
        showcase = None
    out: list[str] = []
    for i, p in enumerate(pairs):
        if i != showcase and 10 <= len(p.src.split()) <= 30 and p.src not in out:
            out.append(p.src)
    if len(out) < count:
        out = (out * (count // max(len(out), 1) + 1))[:count]
    return out[:count]


# ---- server: process, /proc readings -------------------------------------------------------------------
def settled_rss_mb(pid: int, settle: float, samples: int = 5, every: float = 1.5) -> float:
    """The median of `samples` readings `every` s apart, after `settle` s: the server frees what
    closed sessions left at its own pace (webapp.process_memory: a collection every few seconds), so
    one reading lands before or after a collection by chance (+-70 MB measured)."""
    time.sleep(settle)
    readings = []
    for i in range(samples):
        if i:
            time.sleep(every)
        readings.append(rss_mb(pid))
    return sorted(readings)[len(readings) // 2]


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_cpu(root: int, skip: int | None = None) -> float:
    """CPU seconds used so far by `root`'s descendants (not root itself, not `skip` and its own):
    Playwright's driver and the browser's processes."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(stat[1])
            except (OSError, IndexError, ValueError):
                continue
    total, todo = 0.0, [p for p, pp in parents.items() if pp == root and p != skip]
    while todo:
        pid = todo.pop()
        total += driver.process_cpu(pid)
        todo += [p for p, pp in parents.items() if pp == pid]
    return total


def thread_cpu(pid: int, tid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class Monitor:
    """Samples the server's CPU seconds (all threads, and its main thread: the event loop that takes
    websocket messages in and sends them out) and resident memory every `every` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.2):
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float, float, float]] = []     # (time, cpu s, rss MB, main thread cpu s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.perf_counter(), driver.process_cpu(self.pid), rss_mb(self.pid),
                             thread_cpu(self.pid, self.pid)))

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()

    def summary(self) -> dict:
        (t0, c0, r0, m0), (t1, c1, r1, m1) = self.samples[0], self.samples[-1]
        peak, j = 0.0, 0                       # the most CPU used in any 1 s window, in cores
        for i, (ti, ci, _, _) in enumerate(self.samples):
            while self.samples[j][0] < ti - 1.0:
                j += 1
            if j < i and ti - self.samples[j][0] >= 0.5:
                peak = max(peak, (ci - self.samples[j][1]) / (ti - self.samples[j][0]))
        return {"wall_s": t1 - t0, "cpu_s": c1 - c0, "cores": (c1 - c0) / max(t1 - t0, 1e-9), "peak_cores": peak,
                "main_thread_cpu_s": m1 - m0,
                "rss_start_mb": r0, "rss_peak_mb": max(s[2] for s in self.samples), "rss_end_mb": r1}


def start_server(tmp: Path, label: str):
    env = {RUNS_ENV: str(tmp / "runs")}
    return driver.streamlit_server("app.py", env=env, log=tmp / f"streamlit-{label}.log", wait=240)


# ---- the protocol client's student ---------------------------------------------------------------------
def _translation(sess: Session, fwd) -> str | None:
    path = tuple(fwd.metadata.delta_path)
    block = sess.block_path("translation")
    node = sess.nodes.get(path)
    if block is not None and path[:-1] == block and node.type == "markdown":
        return plain(node.proto.body)
    return None


def _markdown_starting(sess: Session, prefix: str) -> str | None:
    for node in sess.nodes.values():
        if node.type == "markdown" and node.proto.body.startswith(prefix):
            return plain(node.proto.body)
    return None


def _zoom(sess: Session, fwd):
    node = sess.nodes.get(tuple(fwd.metadata.delta_path))
    if node is not None and node.type == "plotly_chart" and node.proto.id.endswith("-attn_zoom"):
        return list(plotly_fingerprint(plotly_spec(node)))
    return None


def _step_table(sess: Session, fwd):
    node = sess.nodes.get(tuple(fwd.metadata.delta_path))
    if node is not None and node.type == "heading" and "ranked at step" in node.proto.body:
        step = int(node.proto.body.rsplit(" ", 1)[1])
        row = sess.widget(f"beam_row_{step - 1}_*")
        label = None
        if row is not None:
            p = row.proto
            label = p.options[p.default] if p.HasField("default") and p.default < len(p.options) else p.raw_value
        return [plain(node.proto.body), plain(label) if label is not None else None]
    return None


def protocol_action(sess: Session, step: Step, sentence: str, assets) -> tuple[float, float, float, Any, int | None]:
    """Do one step of the lesson; (visible s, settled s, sent s, what was seen, most requests ahead in a
    queue notice shown meanwhile or None). Raises ClientError.
    assets: the static paths a first visit fetches (a list), True for the page's own list, False for none.
    The files of the page's download buttons are fetched after the run, as the frontend does."""
    t0 = time.perf_counter()
    if step.phase == "open":
        if assets is not False:
            sess.fetch_assets(None if assets is True else assets)
        sess.connect()
        lead = time.perf_counter() - t0
        result = sess.open("/", "", wanted=_translation)
    elif step.phase == "translate":
        lead, result = 0.0, sess.set_widget("text_box", string_value=sentence, wanted=_translation)
    elif step.phase == "attention":
        lead, result = 0.0, sess.navigate("attention", wanted=_zoom)
        if result.found is not None:
            result.found = [_markdown_starting(sess, "**Translation** ("), result.found]
    elif step.phase == "head":
        lead, result = 0.0, sess.set_widget("attn_head", string_value=str(step.arg), wanted=_zoom)
    elif step.phase == "beam":
        lead, result = 0.0, sess.navigate("beam", wanted=_step_table)
        if result.found is not None:
            result.found = [_markdown_starting(sess, "**Best:**")] + result.found
    elif step.phase == "step":
        lead, result = 0.0, sess.set_widget("beam_step", double_array_value=[float(step.arg)], wanted=_step_table)
    else:
        raise ValueError(step.phase)
    if result.errors:
        raise ClientError("; ".join(result.errors[:3]))
    if result.visible is None:
        raise ClientError(f"the run ended without showing what {step.phase} waits for")
    if assets is not False:
        sess.fetch_media()
    ahead = [int(m.group(1)) for text in result.notices for m in [QUEUE_NOTICE.search(text)] if m]
    return lead + result.visible, lead + result.settled, lead, result.found, max(ahead) if ahead else None


def _assets(args):
    """What a protocol student fetches on its first visit: the paths a real browser fetched (recorded
    on the reference server), else the page's own list; nothing with --no-assets."""
    if not args.assets:
        return False
    return getattr(args, "asset_paths", None) or True


async def _record_assets(url: str, timeout: float) -> list[str]:
    from playwright.async_api import async_playwright

    urls: list[str] = []
    async with async_playwright() as playwright:
        browser = await driver.launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("request", lambda r: urls.append(r.url))
            for step in (Step("open", 0, 0, False), Step("attention", 0, 1, False), Step("beam", 0, 1, False)):
                await browser_action(page, url, step, "", timeout * 1000, [])
            await page.wait_for_timeout(1000)                 # chunks and fonts requested after the last draw
        finally:
            await browser.close()
    paths = [u[len(url):] or "/" for u in urls if u.startswith(url)]
    return list(dict.fromkeys(p for p in paths if not p.startswith(("/_stcore/stream", "/media/"))))


def record_assets(url: str, timeout: float) -> list[str] | None:
    """The server paths Chromium fetches on a first visit to Translate, Attention and Beam search
    (the page, scripts, the chunks for the elements drawn, fonts); None without Chromium."""
    if driver.chromium_problem():
        return None
    try:
        return asyncio.run(_record_assets(url, timeout))
    except Exception as err:  # noqa: BLE001 - fall back to the page's own list
        print(f"  (recording a browser's first visit failed: {type(err).__name__}: {err}; using index.html's list)")
        return None


class Sync:
    """A barrier that never hangs the run: it gives up at the stage's deadline (then everyone goes on)."""

    def __init__(self, n: int, deadline: float):
        self.barrier, self.deadline = threading.Barrier(n), deadline

    def wait(self) -> None:
        try:
            self.barrier.wait(timeout=max(self.deadline - time.perf_counter(), 0.01))
        except threading.BrokenBarrierError:
            pass


def protocol_student(i: int, url: str, sentence: str, plan: list[Step], args, sync: Sync | None,
                     deadline: float, records: list[Record]) -> None:
    rng = random.Random(i)
    sess = Session(url, timeout=args.timeout)
    broken = False
    try:
        for step in plan:
            if step.synced and sync is not None:
                if step.phase != "open" and args.pause > 0:
                    time.sleep(args.pause)
                sync.wait()
            elif step.seq > 1 and args.think > 0:
                time.sleep(args.think * rng.uniform(0.5, 1.5))
            rec = Record(i, step.phase, step.seq)
            records.append(rec)
            if time.perf_counter() > deadline:
                rec.error = "not run: time bound"
                continue
            if broken:
                rec.error = "not run: session broken"
                continue
            try:
                rec.visible, rec.settled, rec.sent, rec.seen, rec.queued = protocol_action(sess, step, sentence,
                                                                                           _assets(args))
            except ClientError as err:
                rec.error = str(err)
                broken = "websocket" in rec.error or "send failed" in rec.error or step.phase == "open"
            except Exception as err:  # noqa: BLE001 - an unexpected message shape is an error, not a crash
                rec.error = f"{type(err).__name__}: {err}"
    finally:
        sess.close()


def warm_up(url: str, timeout: float) -> None:
    """The teacher's session before the class: Translate, Attention and Beam search on the showcase sentence."""
    sess = Session(url, timeout=max(timeout, 180))
    try:
        for step in (Step("open", 0, 0, False), Step("attention", 0, 1, False), Step("beam", 0, 1, False)):
            protocol_action(sess, step, "", assets=False)
    finally:
        sess.close()


# ---- the browser's student (Playwright async API: one Chromium, one context per student) ------------------
TRANSLATION_JS = "() => (document.querySelector('.st-key-translation h4')?.innerText || '').trim()"
CHANGED_JS = "old => { const t = (document.querySelector('.st-key-translation h4')?.innerText || '').trim(); " \
             "return t.length > 0 && t !== old; }"
ZOOM_JS = ("h => [...document.querySelectorAll('.st-key-attn_zoom .gtitle')]"
           ".some(e => e.textContent.includes('head ' + h + ' '))")
ZOOM_SEEN_JS = """() => { const g = document.querySelector('.st-key-attn_zoom .js-plotly-plot');
  const L = g.layout, data = g._fullData || g.data; let s = 0;
  for (const t of data) { if (t.z) for (const row of t.z) for (const v of row)
    if (v !== null && isFinite(v)) s += v * v; }
  const tt = a => Array.from((L[a] && L[a].ticktext) || []);
  const title = (L.title && (L.title.text !== undefined ? L.title.text : L.title)) || '';
  return [String(title), tt('xaxis'), tt('yaxis'), s]; }"""
STEP_JS = "n => [...document.querySelectorAll('h3')].some(h => h.innerText.includes('ranked at step ' + n))"
STEP_SEEN_JS = """n => {
  const h = [...document.querySelectorAll('h3')].find(h => h.innerText.includes('ranked at step ' + n));
  const row = document.querySelector('[class*="st-key-beam_row_' + (n - 1) + '_"] input');
  return [h ? h.innerText : null, row ? row.value : null]; }"""
MARKDOWN_JS = """p => [...document.querySelectorAll('[data-testid=stMarkdownContainer]')]
  .map(e => e.innerText.trim()).find(t => t.startsWith(p)) || null"""


def _plain_zoom(seen: list) -> list:
    title, xs, ys, total = seen
    return [plain_title(title), [plain(str(t)) for t in xs], [plain(str(t)) for t in ys], round(float(total), 3)]


async def browser_action(page, url: str, step: Step, sentence: str, timeout_ms: float,
                         sent: list[float]) -> tuple[float, float, float | None, Any]:
    """Do one step of the lesson in the page; (visible s, settled s, sent s, what was seen).
    `sent` collects the moments the page's websocket sent a message (a framesent listener)."""
    t0 = time.perf_counter()
    wait = dict(timeout=timeout_ms)
    if step.phase == "open":
        await page.goto(url + "/", wait_until="commit", **wait)
        await page.wait_for_function("() => " + TRANSLATION_JS + "().length > 0", **wait)
    elif step.phase == "translate":
        old = await page.evaluate(TRANSLATION_JS)
        box = page.locator(".st-key-text_box textarea")
        await box.fill(sentence, **wait)
        await box.press("Control+Enter", **wait)
        await page.wait_for_function(CHANGED_JS, arg=old, **wait)
    elif step.phase in ("attention", "beam"):
        name = "Attention" if step.phase == "attention" else "Beam search"
        await page.locator("[data-testid='stSidebarNav'] a", has_text=name).first.click(**wait)
        await page.wait_for_function(ZOOM_JS if step.phase == "attention" else STEP_JS, arg=1, **wait)
    elif step.phase == "head":
        radio = page.locator("[data-testid='stRadio']", has_text="Head").first
        await radio.get_by_text(str(step.arg), exact=True).click(**wait)
        await page.wait_for_function(ZOOM_JS, arg=step.arg, **wait)
    elif step.phase == "step":
        slider = page.locator(".st-key-beam_step input[type=range]")
        await slider.focus(**wait)
        now = int(await slider.input_value(**wait))
        for _ in range(step.arg - now):
            await slider.press("ArrowRight", **wait)
        await page.wait_for_function(STEP_JS, arg=step.arg, **wait)
    visible = time.perf_counter() - t0
    await page.wait_for_selector(driver.APP_IDLE, state="attached", **wait)
    settled = time.perf_counter() - t0
    # a page load sends its first message before a listener on the new websocket can see it
    first_sent = None if step.phase == "open" else next((t - t0 for t in sent if t >= t0), None)
    if step.phase in ("open", "translate"):
        seen: Any = plain(await page.evaluate(TRANSLATION_JS))
    elif step.phase in ("attention", "head"):
        seen = _plain_zoom(await page.evaluate(ZOOM_SEEN_JS))
        if step.phase == "attention":
            seen = [_or_none(await page.evaluate(MARKDOWN_JS, "Translation (")), seen]
    else:
        seen = [plain(s) if s else s for s in await page.evaluate(STEP_SEEN_JS, step.arg)]
        if step.phase == "beam":
            seen = [_or_none(await page.evaluate(MARKDOWN_JS, "Best:"))] + seen
    return visible, settled, first_sent, seen


def _or_none(text):
    return plain(text) if text else None


async def browser_student(browser, i: int, url: str, sentence: str, plan: list[Step], args, barrier,
                          deadline: float, records: list[Record], external: list[str]) -> None:
    rng = random.Random(i)
    context = await browser.new_context(viewport={"width": 1400, "height": 900})

    async def route(r):
        if driver.is_external(r.request.url):
            external.append(r.request.url)
            await r.abort()
        else:
            await r.continue_()
    await context.route("**/*", route)
    page = await context.new_page()
    sent: list[float] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda _: sent.append(time.perf_counter())))
    try:
        for step in plan:
            if step.synced:
                if step.phase != "open" and args.pause > 0:
                    await asyncio.sleep(args.pause)
                try:
                    await asyncio.wait_for(barrier.wait(), timeout=max(deadline - time.perf_counter(), 0.01))
                except (asyncio.TimeoutError, asyncio.BrokenBarrierError):
                    pass
            elif step.seq > 1 and args.think > 0:
                await asyncio.sleep(args.think * rng.uniform(0.5, 1.5))
            rec = Record(i, step.phase, step.seq)
            records.append(rec)
            if time.perf_counter() > deadline:
                rec.error = "not run: time bound"
                continue
            try:
                rec.visible, rec.settled, rec.sent, rec.seen = await browser_action(page, url, step, sentence,
                                                                                    args.timeout * 1000, sent)
            except Exception as err:  # noqa: BLE001 - a timeout or a vanished element is an error
                rec.error = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    finally:
        await context.close()


async def browser_class(url: str, students: list[str], plan, args, deadline: float, records, external,
                        server_pid: int) -> float:
    """Run the students in one Chromium; returns the CPU seconds Playwright's driver and Chromium used
    meanwhile (read before the browser closes: a finished process's time is gone from /proc)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await driver.launch_chromium(playwright)
        cpu0 = tree_cpu(os.getpid(), server_pid)
        try:
            barrier = asyncio.Barrier(len(students))
            await asyncio.gather(*(browser_student(browser, i, url, s, plan, args, barrier, deadline, records,
                                                   external) for i, s in enumerate(students)))
            return tree_cpu(os.getpid(), server_pid) - cpu0
        finally:
            await browser.close()


# ---- stages --------------------------------------------------------------------------------------------
@dataclass
class Stage:
    client: str               # protocol | browser | reference | churn
    n: int
    records: list[Record] = field(default_factory=list)
    server: dict = field(default_factory=dict)
    client_cpu_s: float = 0.0
    wall_s: float = 0.0
    note: str = ""
    memory: dict = field(default_factory=dict)


def run_class(client: str, n: int, texts: list[str], args, tmp: Path, deadline: float) -> Stage:
    stage = Stage(client, n)
    plan = lesson(args.heads, args.steps, args.n_heads)
    with start_server(tmp, f"{client}-{n}") as server:
        warm_up(server.url, args.timeout)
        cpu0, t0, browser_cpu = _own_cpu(), time.perf_counter(), 0.0
        with Monitor(server.proc.pid) as monitor:
            if client == "protocol":
                sync = Sync(n, deadline)
                threads = [threading.Thread(target=protocol_student, daemon=True,
                                            args=(i, server.url, texts[i], plan, args, sync, deadline, stage.records))
                           for i in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(max(deadline - time.perf_counter(), 0) + args.timeout + 5)
            else:
                external: list[str] = []
                browser_cpu = asyncio.run(browser_class(server.url, texts[:n], plan, args, deadline, stage.records,
                                                        external, server.proc.pid))
                if external:
                    stage.note = f"external requests blocked: {external[:3]}"
        stage.wall_s = time.perf_counter() - t0
        stage.client_cpu_s = _own_cpu() - cpu0 + browser_cpu
        stage.server = monitor.summary()
    return stage


def run_reference(texts: list[str], args, tmp: Path, deadline: float) -> Stage:
    """The N=1 row: each student's script alone on one fresh server, one after the other."""
    stage = Stage("reference", 1)
    plan = lesson(args.heads, args.steps, args.n_heads)
    with start_server(tmp, "reference") as server:
        if args.assets:
            args.asset_paths = record_assets(server.url, args.timeout)
            if args.asset_paths:
                sizes = [len(Session(server.url).get(p)) for p in args.asset_paths]
                stage.note = (f"a first visit fetches {len(sizes)} files, {sum(sizes) / 1e6:.1f} MB as sent "
                              "(recorded from Chromium); every protocol student fetches them")
        warm_up(server.url, args.timeout)
        single = argparse.Namespace(**{**vars(args), "think": 0.0, "pause": 0.0})
        cpu0, t0 = _own_cpu(), time.perf_counter()
        with Monitor(server.proc.pid) as monitor:
            for i, text in enumerate(texts):
                if time.perf_counter() > deadline:
                    stage.note = f"time bound: references for {i} of {len(texts)} students"
                    break
                protocol_student(i, server.url, text, plan, single, None, deadline, stage.records)
        stage.wall_s, stage.client_cpu_s = time.perf_counter() - t0, _own_cpu() - cpu0
        stage.server = monitor.summary()
    return stage


def run_churn(texts: list[str], args, tmp: Path, deadline: float) -> Stage:
    """Sessions come and go (--churn-concurrency at a time): resident memory after 10 of them, at a
    few points after, and after all (each read once the sessions so far have closed, + --settle s)."""
    stage = Stage("churn", args.churn)
    plan = churn_lesson()
    memory: dict[str, Any] = {"curve": [], "past_ttl": []}
    marks = sorted({m for m in (10, 25, 50, 100, 150) if m < args.churn} | {args.churn})
    with start_server(tmp, "churn") as server:
        warm_up(server.url, args.timeout)
        pid = server.proc.pid
        time.sleep(args.settle)
        memory["after_warm_up_mb"] = rss_mb(pid)
        cpu0, t0 = _own_cpu(), time.perf_counter()
        with Monitor(pid) as monitor:
            done = 0
            for batch_end in marks:
                queue = list(range(done, batch_end))
                lock = threading.Lock()

                def worker():
                    while True:
                        with lock:
                            if not queue:
                                return
                            i = queue.pop(0)
                        protocol_student(i, server.url, texts[i], plan, args, None, deadline, stage.records)
                workers = [threading.Thread(target=worker, daemon=True) for _ in range(args.churn_concurrency)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                done = batch_end
                time.sleep(args.settle)
                memory["curve"].append((done, rss_mb(pid)))
                if args.past_ttl and time.perf_counter() + SESSION_TTL_S + 2 < deadline:
                    time.sleep(SESSION_TTL_S + 2)
                    protocol_student(done, server.url, texts[done % len(texts)], [Step("open", 0, 0, False)],
                                     args, None, deadline, [])
                    memory["past_ttl"].append((done, settled_rss_mb(pid, args.settle)))
                if time.perf_counter() > deadline:
                    break
        stage.wall_s, stage.client_cpu_s = time.perf_counter() - t0, _own_cpu() - cpu0
        stage.server = monitor.summary()
        memory["sessions_done"] = done
    stage.memory = memory
    return stage


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


# ---- report --------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the closest ranks."""
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def reference_table(reference: Stage) -> dict[tuple[int, str, int], str]:
    return {(r.student, r.phase, r.seq): _key(r.seen) for r in reference.records if r.error is None}


def _key(seen: Any) -> str:
    return json.dumps(seen, ensure_ascii=False, sort_keys=True)


def compare(stage: Stage, ref: dict) -> dict:
    """Outputs that differ from the student's own single-user reference, and of those, how many are
    another student's (mixed)."""
    by_step: dict[tuple[str, int], dict[str, int]] = {}
    for (student, phase, seq), key in ref.items():
        by_step.setdefault((phase, seq), {})[key] = student
    differ, mixed, unchecked, examples = 0, 0, 0, []
    for r in stage.records:
        if r.error is not None:
            continue
        want = ref.get((r.student, r.phase, r.seq))
        if want is None:
            unchecked += 1
            continue
        got = _key(r.seen)
        if got != want:
            differ += 1
            owner = by_step.get((r.phase, r.seq), {}).get(got)
            if owner is not None and owner != r.student and r.phase != "open":
                mixed += 1
            if len(examples) < 3:
                examples.append({"student": r.student, "phase": r.phase, "seq": r.seq, "saw": r.seen,
                                 "own_reference": json.loads(want), "is_student": owner})
    return {"differ": differ, "mixed": mixed, "unchecked": unchecked, "examples": examples}


def phase_stats(stage: Stage) -> dict[str, dict]:
    out = {}
    for phase in PHASES:
        rows = [r for r in stage.records if r.phase == phase]
        ok = [r.visible for r in rows if r.error is None and r.visible is not None]
        from_send = [r.visible - r.sent for r in rows
                     if r.error is None and r.visible is not None and r.sent is not None]
        settled = [r.settled for r in rows if r.error is None and r.settled is not None]
        errors = [r for r in rows if r.error is not None and not r.error.startswith("not run")]
        out[phase] = {"count": len(rows), "ok": len(ok), "errors": len(errors),
                      "not_run": sum(1 for r in rows if r.error and r.error.startswith("not run")),
                      "p50": pct(ok, 0.5) if ok else None, "p95": pct(ok, 0.95) if ok else None,
                      "max": max(ok) if ok else None,
                      "from_send_p50": pct(from_send, 0.5) if from_send else None,
                      "settled_p50": pct(settled, 0.5) if settled else None,
                      "settled_p95": pct(settled, 0.95) if settled else None,
                      "first_error": errors[0].error if errors else None}
    return out


def comparison(stages: list[Stage], ref: dict) -> None:
    """Each browser stage next to the protocol stage (or the reference) with the same N."""
    by = {(s.client, s.n): s for s in stages}
    for (client, n), b in by.items():
        if client != "browser":
            continue
        p = by.get(("protocol", n)) or (by.get(("reference", 1)) if n == 1 else None)
        if p is None:
            continue
        bs, ps = phase_stats(b), phase_stats(p)
        pname = "reference (one at a time)" if p.client == "reference" else "protocol"
        students_p = max(len({r.student for r in p.records}), 1)
        print(f"browser vs {pname} at N={n}, p50 s: protocol arrived (from its message sent) | browser drawn "
              "from its message sent | browser drawn from the user's action")
        for phase in PHASES:
            print(f"    {phase:9s} {_s(ps[phase]['from_send_p50']):>5s} | {_s(bs[phase]['from_send_p50']):>5s} | "
                  f"{_s(bs[phase]['p50']):>5s}")
        cmp = compare(b, ref)
        print(f"    server CPU per student: protocol {p.server['cpu_s'] / students_p:.2f} s, browser "
              f"{b.server['cpu_s'] / max(n, 1):.2f} s; browser outputs differing from the protocol reference: "
              f"{cmp['differ']} of {sum(1 for r in b.records if r.error is None)}; client CPU: protocol "
              f"{p.client_cpu_s:.1f} s, browser {b.client_cpu_s:.1f} s")


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(stages: list[Stage], ref: dict, args, load: tuple) -> dict:
    print(f"\ncheckpoint {args.checkpoint}; {args.heads} head switches and {args.steps} beam steps per student, "
          f"think {args.think:g} s; {os.cpu_count()} CPUs, load average {load[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after (a shared machine: other work ran too)")
    print("latency per interaction, seconds until the student sees it (p50 / p95 / max); protocol = element "
          "arrived over the websocket, browser = drawn")
    head = f"{'client':9s} {'N':>3s} " + " ".join(f"{p:>17s}" for p in PHASES)
    head += (f" {'errors':>6s} {'differ':>6s} {'mixed':>5s} {'srv CPU s':>9s} {'peak cores':>10s} {'RSS peak':>8s}"
             f" {'wall s':>6s}")
    print(head)
    out = {"args": vars(args), "load_before": load, "load_after": os.getloadavg(), "stages": []}
    for stage in stages:
        if stage.client == "churn":
            continue
        stats = phase_stats(stage)
        cmp = compare(stage, ref) if stage.client != "reference" else {"differ": 0, "mixed": 0, "unchecked": 0,
                                                                         "examples": []}
        errors = sum(s["errors"] for s in stats.values())
        not_run = sum(s["not_run"] for s in stats.values())
        cells = " ".join(f"{_s(stats[p]['p50']):>5s}/{_s(stats[p]['p95']):>5s}/{_s(stats[p]['max']):>5s}"
                         for p in PHASES)
        ref_mark = "ref" if stage.client == "reference" else str(cmp["differ"])
        srv = stage.server
        print(f"{stage.client:9s} {stage.n:3d} {cells} {errors:6d} {ref_mark:>6s} "
              f"{cmp['mixed'] if stage.client != 'reference' else '-':>5} {srv['cpu_s']:9.1f} "
              f"{srv['peak_cores']:10.2f} "
              f"{srv['rss_peak_mb']:7.0f}M {stage.wall_s:6.1f}")
        for phase, s in stats.items():
            if s["first_error"]:
                print(f"    {phase}: {s['errors']} error(s), e.g. {s['first_error'][:160]}")
        if not_run:
            print(f"    {not_run} interaction(s) not run (time bound or broken session)")
        for ex in cmp["examples"]:
            print(f"    differs: {json.dumps(ex, ensure_ascii=False)[:400]}")
        if stage.note:
            print(f"    note: {stage.note}")
        queued = [r.queued for r in stage.records if r.queued is not None]
        if stage.client != "browser":
            print(f"    queue notices: {len(queued)} interaction(s) of {len({r.student for r in stage.records if r.queued is not None})} "
                  f"student(s) were told they wait" + (f" (at most {max(queued)} ahead)" if queued else ""))
        students = max(stage.n if stage.client != "reference" else len({r.student for r in stage.records}), 1)
        main_share = srv['main_thread_cpu_s'] / max(srv['cpu_s'], 1e-9)
        print(f"    server CPU {srv['cpu_s'] / students:.2f} s per student ({main_share:.0%} "
              f"in its main thread, the event loop); client CPU {stage.client_cpu_s:.1f} s "
              f"({'this process + Chromium' if stage.client == 'browser' else 'this process'}); "
              f"settled p95: " + ", ".join(f"{p} {_s(stats[p]['settled_p95'])}" for p in PHASES))
        out["stages"].append({**asdict(stage), "stats": stats, "compare": cmp})
    for stage in stages:
        if stage.client == "churn":
            m, srv = stage.memory, stage.server
            errors = sum(1 for r in stage.records if r.error and not r.error.startswith("not run"))
            print(f"memory: {m.get('sessions_done')} sessions came and went ({args.churn_concurrency} at a time: "
                  f"open, translate its own sentence, Attention, leave; {errors} errors; {stage.wall_s:.0f} s, server "
                  f"CPU {srv['cpu_s']:.0f} s): RSS after the warm-up {m.get('after_warm_up_mb', 0):.0f} MB; "
                  f"peak {srv['rss_peak_mb']:.0f} MB")
            for key, label in (("curve", f"{args.settle:g} s after closing (closed sessions still kept)"),
                               ("past_ttl", f"past the {SESSION_TTL_S:g} s session TTL (closed sessions freed)")):
                curve = dict(m[key])
                if not curve:
                    continue
                after10, after_all = curve.get(10), curve.get(m.get("sessions_done"))
                ratio = f"{after_all / after10:.2f}x of after 10" if after10 and after_all else "-"
                print(f"  {label}: " + ", ".join(f"{k}: {v:.0f} MB" for k, v in m[key]) + f" ({ratio})")
            out["stages"].append({**asdict(stage), "errors": errors})
    comparison(stages, ref)
    print(f"goals (measured later, not here): {GOALS}")
    return out


# ---- main ----------------------------------------------------------------------------------------------
def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()] if text.strip() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks load", description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="1,4,8,16,32",
                        help="students at once, protocol client (the N=1 row, the single-user reference for the "
                             "largest N's sentences, always runs first)")
    parser.add_argument("--browser-n", default="1,4", help="students at once in Chromium (small N; '' skips)")
    parser.add_argument("--churn", type=int, default=200,
                        help="sessions that come and go for the memory check (0 skips)")
    parser.add_argument("--churn-concurrency", type=int, default=4)
    parser.add_argument("--churn-sentences", type=int, default=0,
                        help="churn sessions cycle through this many sentences (0: each its own), to tell what the "
                             "result caches hold from what sessions leave behind")
    parser.add_argument("--heads", type=int, default=3, help="head switches per student")
    parser.add_argument("--steps", type=int, default=3, help="beam steps per student")
    parser.add_argument("--think", type=float, default=0.5, help="seconds between a student's switches (+-50%%)")
    parser.add_argument("--pause", type=float, default=2.0,
                        help="seconds a student reads before the next phase (then all start together)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before an interaction counts as an error")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds to wait before reading memory")
    parser.add_argument("--no-past-ttl", dest="past_ttl", action="store_false",
                        help="churn: read memory only while closed sessions are still kept (skip the reads past "
                             "the session TTL)")
    parser.add_argument("--no-assets", dest="assets", action="store_false",
                        help="protocol client: skip the HTTP requests of a first visit")
    parser.add_argument("--max-minutes", type=float, default=10.0,
                        help="no stage starts (and running ones stop) after this")
    parser.add_argument("--checkpoint", default=CHECKPOINT)
    parser.add_argument("--json", help="also write every record and figure to this file")
    args = parser.parse_args(argv)
    ns, browser_ns = _ints(args.n), _ints(args.browser_n)
    if browser_ns:
        problem = driver.chromium_problem()
        if problem:
            print(f"browser stages skipped: {problem}")
            browser_ns = []
    start = time.perf_counter()
    deadline = start + 60 * args.max_minutes
    config = json.loads((shipped_root() / args.checkpoint / "config.json").read_text())
    args.n_heads = int(config["model"]["n_heads"])
    students = max(ns + browser_ns + [1])
    texts = sentences(args.checkpoint, students + args.churn)
    tmp = Path(tempfile.mkdtemp(prefix="bench_load_"))
    load = os.getloadavg()
    stages: list[Stage] = []

    def log(stage: Stage) -> None:
        s = phase_stats(stage)
        print(f"  {stage.client} N={stage.n}: {stage.wall_s:.0f} s, translate p95 {_s(s['translate']['p95'])} s, "
              f"errors {sum(v['errors'] for v in s.values())}, server CPU {stage.server.get('cpu_s', 0):.0f} s "
              f"[{time.perf_counter() - start:.0f} s so far]", flush=True)

    print(f"load: {students} students' sentences, reference first; server logs in {tmp}", flush=True)
    reference = run_reference(texts[:students], args, tmp, deadline)
    log(reference)
    stages.append(reference)
    ref = reference_table(reference)
    for client, n in [("protocol", n) for n in ns if n > 1] + [("browser", n) for n in browser_ns]:
        if time.perf_counter() > deadline:
            print(f"  {client} N={n}: skipped (time bound)")
            continue
        stage = run_class(client, n, texts, args, tmp, deadline)
        log(stage)
        stages.append(stage)
    if args.churn > 0:
        if time.perf_counter() > deadline:
            print("  churn: skipped (time bound)")
        else:
            churn_texts = texts[students:]
            if args.churn_sentences > 0:                  # sessions without new results: what sessions leave
                churn_texts = [churn_texts[i % args.churn_sentences] for i in range(args.churn)]
            churn = run_churn(churn_texts, args, tmp, deadline)
            print(f"  churn: RSS {churn.memory} [{time.perf_counter() - start:.0f} s so far]", flush=True)
            stages.append(churn)
    out = report(stages, ref, args, load)
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
