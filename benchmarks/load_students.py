"""The load benchmark's students: the protocol client's (Streamlit's protobufs over its websocket) and
Chromium's (Playwright, one context per student), doing the same lesson step by step."""
from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any

from benchmarks import browser as driver
from benchmarks.streamlit_client import ClientError, Session, plain, plain_title, plotly_fingerprint, plotly_spec
from benchmarks.load_lesson import QUEUE_NOTICE, Record, Step
from benchmarks.load_server import tree_cpu


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
    ahead = [int(m.group(1) or 0) for text in result.notices for m in [QUEUE_NOTICE.search(text)] if m]
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
