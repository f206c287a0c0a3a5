"""Is the app still responsive while the head lab runs? Head switches (Attention) and beam steps (Beam
search) with no job running, next to the same switches while the Heads page's lab runs in the app process.

One `streamlit run app.py` on 127.0.0.1 (a temporary runs directory, so no cached lab result is found)
and one headless Chromium with two browser contexts (two users, two Streamlit sessions):
- the "user" context opens the Attention page (cross-attention of the checkpoint's first held-out
  sentence, as `python -m benchmarks app` does) and switches head N times, then the Beam search page
  and moves its step slider N times: the idle figures;
- the "lab" context opens the Heads page and starts the head lab (default 200 sentences, the page's
  default), and stays on it (its progress fragment re-runs every 2 s, as for a user watching it);
- once the job has reached its single-head removal stage (--during: greedy decoding of the test set
  with one head removed at a time, then pruning curves: most of the lab's time; statistics and
  importance take seconds), the user context repeats the same switches;
  the lab's progress is read before and after, and the run is void (exit status 1) unless the job was
  still running at the end and its thread (the busiest of the app process) computed meanwhile;
- the lab is cancelled with its Cancel button (until the page says it was cancelled: the job thread has
  ended), and the user context switches once more, idle again, so drift in the machine's load shows
  as a difference between the two idle rounds rather than as a slowdown.
Timing as in benchmarks/app.py (its `switch`): from the click or key press to "visible" (the new
head's heatmap or step's table heading drawn) and to "settled" (the script run over). The table
shows medians and maxima, idle (both idle rounds together) and during the lab, and their ratio;
goals: during the lab a switch is visible in < 1 s and at most 3x its idle time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from benchmarks import browser as driver
from benchmarks.app import HEAD_DRAWN, STEP_SHOWN, head_switches, sentence_and_shape, step_switches
from explorer.store.run_paths import RUNS_ENV

CHECKPOINT = "bible-es-en"
GOAL_SECONDS, GOAL_RATIO = 1.0, 3.0
MIN_JOB_CORES = 0.1             # the lab's thread computed through the measurements (else the run is void)
PROGRESS = "() => document.querySelector(\"[data-testid='stProgress']\")?.innerText || ''"
RUNNING = re.compile(r"Head lab running: (?P<stage>.+?) (?P<done>\d+)/(?P<total>\d+|\?) \((?P<secs>\d+) s\)")
STAGES = ("statistics", "importance", "single-head removal", "pruning")   # explorer.studies.heads.job.STAGES


def lab_progress(page) -> dict | None:
    """The lab page's progress line parsed (stage, done, total, seconds), or None when none is shown."""
    match = RUNNING.search(page.evaluate(PROGRESS))
    if not match:
        return None
    return {"stage": match["stage"], "done": int(match["done"]), "total": match["total"], "secs": int(match["secs"]),
            "text": match[0]}


def start_lab(page, url: str, sentences: int, during: str, timeout: float = 300) -> dict:
    """Open the Heads page, set the number of sentences, press Start, until the job has reached the
    stage `during` (one of STAGES); its progress then."""
    page.goto(url, wait_until="commit")
    start = page.locator(".st-key-heads_start button")
    start.wait_for(timeout=timeout * 1000)
    driver.wait_idle(page, timeout)
    box = page.locator(".st-key-heads_n input")
    if int(box.input_value()) != sentences:
        box.fill(str(sentences))
        driver.rerun(page, lambda: box.press("Enter"), timeout)                # the Start button drawn anew
    start.click()
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        p = lab_progress(page)
        if p and p["stage"] in STAGES and STAGES.index(p["stage"]) >= STAGES.index(during):
            return p
        time.sleep(0.5)
    raise RuntimeError(f"the head lab did not reach {during!r} in {timeout:.0f} s: {page.evaluate(PROGRESS)!r}")


def cancel_lab(page, timeout: float = 300) -> float:
    """Press Cancel; seconds until the page says the job was cancelled (its thread has ended)."""
    t0 = time.perf_counter()
    page.locator(".st-key-heads_cancel button").click()
    page.get_by_text("The head lab was cancelled").wait_for(timeout=timeout * 1000)
    return time.perf_counter() - t0


def user_round(page, server, base: str, query: str, shape: dict, n: int) -> dict[str, list[dict]]:
    """Open Attention and switch head n times, then Beam search and move the step n times."""
    page.goto(f"{base}/attention?{query}")
    page.wait_for_function(HEAD_DRAWN, arg=["attn_zoom", 1], timeout=300_000)
    driver.wait_idle(page, 120)
    heads = head_switches(page, server, "attn_zoom", shape["heads"], n)
    page.goto(f"{base}/beam?{query}")
    page.wait_for_function(STEP_SHOWN, arg=1, timeout=300_000)
    driver.wait_idle(page, 120)
    return {"head": heads, "step": step_switches(page, server, "beam_step", n)}


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by each thread of a process (Linux /proc), by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:                                            # the thread ended meanwhile
            continue
        out[task.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def busiest_thread(before: dict[str, float], after: dict[str, float], wall: float) -> tuple[float, float]:
    """(cores used by the busiest thread, cores used by all the others) between two thread_cpu()s:
    during the lab the busiest thread is the lab's (it computes all the time; with more than one torch
    thread, torch's pool threads compute for it too, and count among the others)."""
    used = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True) or [0.0]
    return used[0] / wall, sum(used[1:]) / wall


def values(rows: list[dict], field: str) -> list[float]:
    return [r[field] for r in rows if r.get(field) is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks heads-load", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=CHECKPOINT, help="shipped checkpoint for the pages and the lab")
    parser.add_argument("--sentences", type=int, default=200, help="the head lab's sentences (long enough to "
                        "outlast the measurements)")
    parser.add_argument("--during", choices=STAGES, default="single-head removal",
                        help="measure once the lab has reached this stage (the decoding stages, single-head "
                        "removal and pruning, are most of its time; statistics and importance take seconds)")
    parser.add_argument("--threads", type=int, help="$EXPLORER_THREADS for the server (torch threads of the app "
                        "and of the lab; default: the app's, 1)")
    parser.add_argument("--switches", type=int, default=10, help="head switches and step switches per round")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    problem = driver.chromium_problem()
    if problem:
        print(f"skipped: {problem}")
        return 0
    from playwright.sync_api import sync_playwright

    text, shape = sentence_and_shape(args.checkpoint)
    runs = tempfile.mkdtemp(prefix="bench_heads_runs_")
    env = {RUNS_ENV: runs, **({"EXPLORER_THREADS": str(args.threads)} if args.threads else {})}
    query = urlencode({"ckpt": args.checkpoint, "text": text})
    rounds: dict[str, dict[str, list[dict]]] = {}
    lab: dict = {}
    load_before = os.getloadavg()
    try:
        with sync_playwright() as playwright:
            browser = driver.launch_chromium(playwright)
            try:
                with driver.streamlit_server(driver.ROOT / "app.py", env=env, wait=300) as server:
                    user_ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                    lab_ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                    external: list[str] = []
                    for ctx in (user_ctx, lab_ctx):
                        driver.block_external(ctx, external)
                    user, lab_page = user_ctx.new_page(), lab_ctx.new_page()
                    rounds["idle before"] = user_round(user, server, server.url, query, shape, args.switches)
                    print("  idle round done", flush=True)
                    started = start_lab(lab_page, f"{server.url}/heads?ckpt={args.checkpoint}", args.sentences,
                                        args.during)
                    before = lab_progress(lab_page)
                    threads0, t0 = thread_cpu(server.proc.pid), time.perf_counter()
                    rounds["during the lab"] = user_round(user, server, server.url, query, shape, args.switches)
                    job_cores, rest_cores = busiest_thread(threads0, thread_cpu(server.proc.pid),
                                                           time.perf_counter() - t0)
                    time.sleep(2.5)                                  # one more refresh of the progress fragment
                    after = lab_progress(lab_page)
                    lab = {"started": started, "before": before, "after": after, "job_cores": job_cores,
                           "other_cores": rest_cores}
                    print(f"  round during the lab done; lab: {before and before['text']} -> "
                          f"{after and after['text']}", flush=True)
                    lab["cancel_s"] = cancel_lab(lab_page) if after else None
                    rounds["idle after"] = user_round(user, server, server.url, query, shape, args.switches)
                    for ctx in (user_ctx, lab_ctx):
                        ctx.close()
                    if external:
                        print(f"  note: the pages requested external URLs: {external[:3]}")
            finally:
                browser.close()
    finally:
        shutil.rmtree(runs, ignore_errors=True)
    valid = bool(lab.get("after")) and lab.get("job_cores", 0.0) >= MIN_JOB_CORES
    report(args, text, shape, rounds, lab, load_before, valid)
    return 0 if valid else 1


def report(args, text: str, shape: dict, rounds: dict, lab: dict, load_before, valid: bool) -> None:
    after = lab.get("after")
    print(f"checkpoint {args.checkpoint}; sentence {text[:60]!r}…; cross-attention {shape['q']}x{shape['k']}, "
          f"{shape['heads']} heads, {shape['steps']} beam steps; head lab over {args.sentences} sentences; "
          f"torch threads {args.threads or 'the app default (1)'}; "
          f"{os.cpu_count()} CPUs, load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; "
          f"{args.switches} switches of each kind per round")
    cancel = f"; Cancel took {lab['cancel_s']:.1f} s" if lab.get("cancel_s") is not None else ""
    print(f"lab progress during the measurements: {lab['before']['text'] if lab.get('before') else '?'} -> "
          f"{after['text'] if after else 'NOT RUNNING (finished or failed: use more --sentences)'}; meanwhile the "
          f"lab's thread used {lab.get('job_cores', float('nan')):.2f} cores, the app's other threads "
          f"{lab.get('other_cores', float('nan')):.2f}{cancel}")
    print(f"{'':34s} {'idle median / max':>18s} {'lab median / max':>18s} {'ratio median / max':>19s}  goal")
    for kind, label in (("head", "switch head (Attention)"), ("step", "switch step (Beam search)")):
        for field in ("visible", "settled"):
            idle = values(rounds["idle before"][kind], field) + values(rounds["idle after"][kind], field)
            busy = values(rounds["during the lab"][kind], field)
            mi, xi, mb, xb = statistics.median(idle), max(idle), statistics.median(busy), max(busy)
            met = "met" if mb < GOAL_SECONDS and mb / mi <= GOAL_RATIO else "MISSED"
            print(f"{label + ', ' + field:34s} {mi:7.2f}s / {xi:5.2f}s {mb:7.2f}s / {xb:5.2f}s "
                  f"{mb / mi:8.2f}x / {xb / xi:5.2f}x  < {GOAL_SECONDS:g} s, <= {GOAL_RATIO:g}x: {met}")
    print("idle rounds apart (visible medians, head / step): before " + " / ".join(
        f"{statistics.median(values(rounds['idle before'][k], 'visible')):.2f}s" for k in ("head", "step")) +
        ", after " + " / ".join(f"{statistics.median(values(rounds['idle after'][k], 'visible')):.2f}s"
                                for k in ("head", "step")))
    print("where a switch goes (medians: click -> script start, script run):")
    for kind in ("head", "step"):
        parts = []
        for name in ("idle before", "during the lab", "idle after"):
            rows = rounds[name][kind]
            parts.append(f"{name} " + ", ".join(f"{statistics.median(values(rows, f)):.2f} s"
                                                 if values(rows, f) else "?" for f in ("to_run", "run")))
        print(f"  {kind}: " + " | ".join(parts))
    if not valid:
        print(f"VOID: the head lab was not running through the measurements (still running at the end, its thread "
              f"using >= {MIN_JOB_CORES} cores)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "shape": shape, "rounds": rounds, "lab": lab,
                                               "valid": valid, "load_before": load_before,
                                               "load_after": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
