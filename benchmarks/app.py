"""App responsiveness in headless Chromium: cold start to the first translation and to usable controls,
and the re-render after switching head (Attention page) or step (Beam search page), next to a bare Streamlit page.

Ours: `streamlit run app.py`, started fresh, its home page (Translate on bible-es-en, the first
held-out sentence) until the translation is on screen. Then, on that same server, the Attention page
(cross-attention of that sentence) with the head switched N times, and the Beam search page with
its step slider moved N times. Reference, started the same way in the same run: a bare Streamlit
page drawing one plotly heatmap of the same size, with a head radio and a step slider that redraw it.
Rounds alternate ours / reference so that load from other processes hits both alike; the table shows
medians and our/reference ratios next to the absolute times (goals: cold start < 8 s, controls usable
< 5 s, a switch < 0.5 s).

Each cold start is timed from the creation of the `streamlit run` process to two moments, both seen
in the browser (a 20 ms poll in the page, CONTROLS and TRANSLATION below, stamped with the wall clock):
- first translation: the Translate page's translation box (`.st-key-translation h4`) holds text;
  on the reference page, its heatmap is drawn (and its echo box, the same selector, is filled);
- controls usable: the Translate text area (`.st-key-text_box textarea`) is in the page, not
  disabled and not read-only, and neither it nor any element around it is stale (Streamlit marks
  the elements of the previous run `data-stale="true"` and greys them while a run is under way),
  so a click in it and typing would edit it. The reference page has a text area with the same key.

Also on that server: typing a new ~25-word held-out sentence into the Translate page's box (Ctrl+Enter)
until its translation is on screen, next to the reference page echoing the typed text ("Feels live: a
~25-word sentence translates and renders in well under a second").

A switch is timed from the click (or key press) to "visible" (the new head's heatmap, or the new
step's table heading, drawn) and to "settled" (the script run over, every element final); the
breakdown says how much of it was the browser reaching the server, and how much the script run.

Before and after a change, in one session: `--versus CHECKOUT` starts that other checkout's app.py
(a worktree of the commit before, say) in every cold round too, the three sides' order turning from
round to round, and its column is reported beside ours; `--cold-only` skips the switches.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from benchmarks import browser as driver
from explorer.store.run_paths import RUNS_ENV, shipped_root

CHECKPOINT = "bible-es-en"
GOALS = {"cold": 8.0, "controls": 5.0, "head": 0.5, "step": 0.5, "sentence": 1.0}
CONTROLS = ("() => { const t = document.querySelector('.st-key-text_box textarea'); "
            "return !!t && !t.disabled && !t.readOnly && !t.closest('[data-stale=\"true\"]'); }")
# Stamps (Date.now(), ms) of the first poll at which each condition held: window.__firsts.
FIRSTS = """(conds) => { window.__firsts = {}; const fs = Object.fromEntries(
    Object.entries(conds).map(([k, src]) => [k, eval(src)]));
  const poll = () => { for (const [k, f] of Object.entries(fs)) {
      try { if (!(k in window.__firsts) && f()) window.__firsts[k] = Date.now(); } catch (e) {} } };
  poll(); window.__firstsTimer = setInterval(poll, 20); }"""
TRANSLATION = "() => (document.querySelector('.st-key-translation h4')?.innerText || '').trim().length > 0"
HEAD_DRAWN = ("k => [...document.querySelectorAll('.st-key-' + k[0] + ' .gtitle')]"
              ".some(e => e.textContent.includes('head ' + k[1] + ' '))")
NEW_TRANSLATION = ("old => { const t = (document.querySelector('.st-key-translation h4')?.innerText || '').trim(); "
                   "return t.length > 0 && t !== old; }")
STEP_SHOWN = "n => [...document.querySelectorAll('h3')].some(h => h.innerText.includes('ranked at step ' + n))"
WATCH = """() => { window.__ev = []; const app = document.querySelector("[data-testid='stApp']");
  if (!window.__watching) { window.__watching = true;
    new MutationObserver(() => window.__ev.push([app.getAttribute('data-test-script-state'), performance.now()]))
      .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']}); }
  return performance.now(); }"""
REFERENCE = '''"""Reference for the app benchmark: one plotly heatmap, a head radio and a step slider."""
import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="reference", layout="wide")
st.title("Reference")
head = st.radio("Head", list(range(1, {heads} + 1)), horizontal=True, key="head")
step = st.slider("Step", 1, {steps}, 1, key="step")
z = np.random.default_rng(head * 1000 + step).random(({q}, {k}))
fig = go.Figure(go.Heatmap(z=z, x=[f"k{{i}}" for i in range({k})], y=[f"q{{i}}" for i in range({q})]))
fig.update_layout(title=f"Layer 1, head {{head}} · step {{step}} ", height=520)
st.plotly_chart(fig, key="ref_zoom")
st.subheader(f"Candidates ranked at step {{step}}")
text = st.text_area("Sentence", key="text_box")
with st.container(key="translation"):
    st.markdown("#### " + (text.upper() or "(nothing typed)"))
'''


def sentence_and_shape(name: str) -> tuple[str, dict]:
    """The sentence the app opens on and the sizes the reference page copies (q, k, heads, steps)."""
    import torch

    from explorer.files.names import TEST_SPLIT
    from explorer.store.checkpoint import load_checkpoint
    from explorer.config import DecodeConfig
    from explorer.decoding import translate
    from explorer.data.files import read_tsv

    torch.set_num_threads(1)
    path = shipped_root() / name
    text = read_tsv(str(path / TEST_SPLIT))[0].src                      # what the app opens on
    ckpt = load_checkpoint(path, device="cpu")
    result = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="beam", beam_size=5, n_best=5),
                       trace=True)
    return text, {"q": len(result.best.ids), "k": len(result.src_ids), "heads": ckpt.config.n_heads,
                  "steps": max(result.beam_trace.n_steps, 2)}


def switch(page, server, act, done: str, arg) -> dict:
    """Time one switch: act(), until `done` holds (visible), then until the run ends (settled)."""
    t0_browser = page.evaluate(WATCH)
    cpu0, t0 = driver.process_cpu(server.proc.pid), time.perf_counter()
    act()
    page.wait_for_function(done, arg=arg, timeout=120_000)
    visible = time.perf_counter() - t0
    driver.wait_idle(page, 120)
    settled = time.perf_counter() - t0
    events = page.evaluate("() => window.__ev")
    start = next((t for s, t in events if s == "running"), None)
    end = next((t for s, t in reversed(events) if s == "notRunning"), None)
    return {"visible": visible, "settled": settled, "app_cpu": driver.process_cpu(server.proc.pid) - cpu0,
            "to_run": None if start is None else (start - t0_browser) / 1e3,
            "run": None if start is None or end is None else (end - start) / 1e3}


def head_switches(page, server, key: str, heads: int, n: int) -> list[dict]:
    radio = page.locator("[data-testid='stRadio']", has_text="Head").first
    out = []
    for i in range(n):
        head = (i + 1) % heads + 1                                         # 2, 3, ..., heads, 1, 2, ...
        out.append(switch(page, server, lambda: radio.get_by_text(str(head), exact=True).click(), HEAD_DRAWN,
                          [key, head]))
    return out


def step_switches(page, server, key: str, n: int) -> list[dict]:
    slider = page.locator(f".st-key-{key} input[type=range]")
    top = int(slider.get_attribute("max"))
    out = []
    for _ in range(n):
        now = int(slider.input_value())
        target, press = (now + 1, "ArrowRight") if now < top else (now - 1, "ArrowLeft")

        def act(press=press):
            slider.focus()
            slider.press(press)
        out.append(switch(page, server, act, STEP_SHOWN, target))
    return out


def sentences_of_about(words: int, n: int, path: Path) -> list[str]:
    """n held-out sentences of words +- 5 words (the Translate page's "~25-word sentence")."""
    from explorer.data.files import read_tsv
    from explorer.files.names import TEST_SPLIT

    pairs = read_tsv(str(path / TEST_SPLIT))
    return [p.src for p in pairs if abs(len(p.src.split()) - words) <= 5][1:n + 1]


def sentence_switches(page, server, sentences: list[str]) -> list[dict]:
    """Type each sentence into the Translate box, Ctrl+Enter, until a different translation shows."""
    box = page.locator(".st-key-text_box textarea")
    out = []
    for text in sentences:
        old = page.evaluate("() => (document.querySelector('.st-key-translation h4')?.innerText || '').trim()")

        def act(text=text):
            box.fill(text)
            box.press("Control+Enter")
        out.append(switch(page, server, act, NEW_TRANSLATION, old))
    return out


def run_server(browser, script: Path, path: str, ready: str, env: dict, then=None) -> tuple[float, float, float]:
    """Start `streamlit run script` fresh, open `path` until `ready` holds, then run then(page, server).

    Returns (seconds from process start to ready, CPU seconds the server used by then, seconds from
    process start to CONTROLS), the first two stamps taken by the page's own 20 ms poll (FIRSTS)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    external: list[str] = []
    page.on("request", lambda r: external.append(r.url) if driver.is_external(r.url) else None)
    try:
        with driver.streamlit_server(script, env=env, wait=None) as server:
            driver.wait_healthy(server, 300)
            started_epoch = time.time() - (time.perf_counter() - server.started)     # same machine, same clock
            page.goto(server.url + path, wait_until="commit")
            page.evaluate(FIRSTS, {"ready": ready, "controls": CONTROLS})
            page.wait_for_function(ready, timeout=300_000)
            cold_cpu = driver.process_cpu(server.proc.pid)
            page.wait_for_function("() => 'ready' in window.__firsts && 'controls' in window.__firsts",
                                   timeout=300_000)
            firsts = page.evaluate("() => { clearInterval(window.__firstsTimer); return window.__firsts; }")
            cold = firsts["ready"] / 1e3 - started_epoch
            controls = firsts["controls"] / 1e3 - started_epoch
            driver.wait_idle(page, 120)
            if then:
                then(page, server)
    finally:
        page.close()
    if external:
        print(f"  note: the page requested external URLs: {external[:3]}")
    return cold, cold_cpu, controls


def median(rows: list[dict], field: str) -> float | None:
    values = [r[field] for r in rows if r.get(field) is not None]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks app", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=CHECKPOINT, help="shipped checkpoint the app opens on")
    parser.add_argument("--cold-rounds", type=int, default=3, help="fresh server starts per side (median of)")
    parser.add_argument("--switches", type=int, default=7, help="head switches and step switches per side")
    parser.add_argument("--quick", action="store_true", help="1 cold start per side and 3 switches of each kind")
    parser.add_argument("--max-minutes", type=float, default=15.0,
                        help="start no further cold round after this long (at least one round always runs)")
    parser.add_argument("--cold-only", action="store_true", help="cold starts only: no switches timed")
    parser.add_argument("--versus", metavar="CHECKOUT",
                        help="another checkout (a worktree of the commit before a change): its app.py is started "
                             "in every cold round too, alternating with ours, and reported beside it")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.cold_rounds, args.switches = 1, 3
    versus = Path(args.versus).resolve() / "app.py" if args.versus else None
    if versus is not None and not versus.is_file():
        parser.error(f"--versus: no app.py in {args.versus}")
    problem = driver.chromium_problem()
    if problem:
        print(f"skipped: {problem}")
        return 0
    from playwright.sync_api import sync_playwright

    text, shape = sentence_and_shape(args.checkpoint)
    env = {RUNS_ENV: tempfile.mkdtemp(prefix="bench_app_runs_")}
    ref_dir = Path(tempfile.mkdtemp(prefix="bench_app_ref_"))
    ref_script = ref_dir / "reference.py"
    ref_script.write_text(REFERENCE.format(**shape))
    load_before = os.getloadavg()
    names = ["ours", "reference"] + (["versus"] if versus else [])
    cold: dict[str, list[float]] = {name: [] for name in names}
    cold_cpu: dict[str, list[float]] = {name: [] for name in names}
    controls: dict[str, list[float]] = {name: [] for name in names}
    deadline = time.perf_counter() + 60 * args.max_minutes
    switches: dict[str, dict[str, list[dict]]] = {"ours": {}, "reference": {}}
    query = urlencode({"ckpt": args.checkpoint, "text": text})

    sentences = sentences_of_about(25, args.switches, shipped_root() / args.checkpoint)

    def ours_switches(page, server):
        switches["ours"]["sentence"] = sentence_switches(page, server, sentences)
        page.goto(f"{server.url}/attention?{query}")
        page.wait_for_function(HEAD_DRAWN, arg=["attn_zoom", 1], timeout=300_000)
        driver.wait_idle(page, 120)
        switches["ours"]["head"] = head_switches(page, server, "attn_zoom", shape["heads"], args.switches)
        page.goto(f"{server.url}/beam?{query}")
        page.wait_for_function(STEP_SHOWN, arg=1, timeout=300_000)
        driver.wait_idle(page, 120)
        switches["ours"]["step"] = step_switches(page, server, "beam_step", args.switches)

    def ref_switches(page, server):
        switches["reference"]["head"] = head_switches(page, server, "ref_zoom", shape["heads"], args.switches)
        switches["reference"]["step"] = step_switches(page, server, "step", args.switches)
        switches["reference"]["sentence"] = sentence_switches(page, server, sentences)

    with sync_playwright() as playwright:
        browser = driver.launch_chromium(playwright)
        try:
            sides = [("ours", driver.ROOT / "app.py", TRANSLATION, ours_switches),
                     ("reference", ref_script, "() => !!document.querySelector('.st-key-ref_zoom svg.main-svg')",
                      ref_switches)]
            if versus is not None:
                sides.insert(1, ("versus", versus, TRANSLATION, None))
            for r in range(args.cold_rounds):
                last = r == args.cold_rounds - 1 or time.perf_counter() > deadline
                for side, script, ready, then in sides[r % len(sides):] + sides[:r % len(sides)]:
                    switch_then = then if last and not args.cold_only else None
                    seconds, cpu, usable = run_server(browser, script, "/", ready, env, switch_then)
                    cold[side].append(seconds)
                    cold_cpu[side].append(cpu)
                    controls[side].append(usable)
                print(f"  cold round {r + 1}: first translation " + ", ".join(
                    f"{n} {cold[n][-1]:.2f} s" for n in names) + "; controls usable " + ", ".join(
                    f"{n} {controls[n][-1]:.2f} s" for n in names), flush=True)
                if last:
                    break
        finally:
            browser.close()
    report(args, text, shape, cold, cold_cpu, controls, switches, load_before)
    return 0


def report(args, text: str, shape: dict, cold: dict, cold_cpu: dict, controls: dict, switches: dict,
           load_before) -> None:
    versus = "versus" in cold
    print(f"checkpoint {args.checkpoint}; sentence: {text[:70]!r}…; cross-attention {shape['q']}x{shape['k']}, "
          f"{shape['heads']} heads, {shape['steps']} beam steps; {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; medians of {len(cold['ours'])} cold starts"
          + ("" if args.cold_only else f" and {args.switches} switches")
          + (f"; versus: {args.versus}'s app.py" if versus else ""))
    print(f"{'':46s} {'ours':>8s} {'reference':>10s} {'ratio':>7s}  goal"
          + ("         versus  ours/versus" if versus else ""))
    rows = {"cold start -> first translation": (cold, GOALS["cold"]),
            "cold start -> controls usable": (controls, GOALS["controls"])}
    for name, (found, goal) in rows.items():
        ours, ref = statistics.median(found["ours"]), statistics.median(found["reference"])
        other = statistics.median(found["versus"]) if versus else None
        met = "met" if ours < goal else "MISSED"
        print(f"{name:46s} {ours:7.2f}s {ref:9.2f}s {ours / ref:6.2f}x  < {goal:g} s: {met}"
              + (f"  {other:9.2f}s {ours / other:6.2f}x" if versus else ""))
    if not args.cold_only:
        for kind, label in (("head", "switch head (Attention)"), ("step", "switch step (Beam search)"),
                            ("sentence", "new ~25-word sentence (Translate)")):
            for field in ("visible", "settled"):
                ours, ref = median(switches["ours"][kind], field), median(switches["reference"][kind], field)
                print(f"{label + ', ' + field:46s} {ours:7.2f}s {ref:9.2f}s {ours / ref:6.2f}x  < {GOALS[kind]:g} s: "
                      f"{'met' if ours < GOALS[kind] else 'MISSED'}")
    print(f"server CPU to the first translation: ours {statistics.median(cold_cpu['ours']):.2f} s, reference "
          f"{statistics.median(cold_cpu['reference']):.2f} s"
          + (f", versus {statistics.median(cold_cpu['versus']):.2f} s" if versus else "")
          + " (the rest of the cold time is waiting for the CPU, and the browser)")
    if not args.cold_only:
        print("where a switch goes (medians; ours | reference): click -> script start, script run, server CPU")
        for kind in ("head", "step", "sentence"):
            parts = [", ".join(_secs(median(switches[side][kind], f)) for f in ("to_run", "run", "app_cpu")) + " CPU"
                     for side in ("ours", "reference")]
            print(f"  {kind}: " + " | ".join(parts))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "shape": shape, "cold_s": cold,
                                               "cold_server_cpu_s": cold_cpu, "controls_s": controls,
                                               "switches": switches,
                                               "load_before": load_before, "load_after": os.getloadavg()}, indent=2))


def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f} s"


if __name__ == "__main__":
    raise SystemExit(main())
