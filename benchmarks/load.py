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
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import browser as driver
from benchmarks.load_lesson import CHECKPOINT, SESSION_TTL_S, Stage, Step, churn_lesson, lesson, sentences
from benchmarks.load_report import fmt_s, phase_stats, reference_table, report
from benchmarks.load_server import Monitor, rss_mb, settled_rss_mb, start_server
from benchmarks.load_students import Sync, browser_class, protocol_student, record_assets, warm_up
from benchmarks.streamlit_client import Session
from explorer.store.run_paths import shipped_root


# ---- stages --------------------------------------------------------------------------------------------
def run_class(client: str, n: int, texts: list[str], args, tmp: Path, deadline: float, int8: bool = False) -> Stage:
    """N students at once on a fresh server; `int8`: the server's default is int8 weights (the row's
    client reads "int8": the protocol client on that server)."""
    stage = Stage(client, n)
    plan = lesson(args.heads, args.steps, args.n_heads)
    with start_server(tmp, f"{client}-{n}{'-int8' if int8 else ''}", int8) as server:
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
    if int8:
        stage.client = "int8"
        stage.note = ("server default int8 weights (EXPLORER_INT8=1): the Translate page's translations come from "
                      "the int8 copy, so 'differ' counts those int8 rounding changed against the float32 reference")
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
    parser.add_argument("--int8", choices=("off", "on", "both"), default="off",
                        help="protocol stages on a server whose default is int8 weights (EXPLORER_INT8=1); both: each "
                             "N on a float32 server, then on an int8 one (the reference stays float32)")
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
        print(f"  {stage.client} N={stage.n}: {stage.wall_s:.0f} s, translate p95 {fmt_s(s['translate']['p95'])} s, "
              f"errors {sum(v['errors'] for v in s.values())}, server CPU {stage.server.get('cpu_s', 0):.0f} s "
              f"[{time.perf_counter() - start:.0f} s so far]", flush=True)

    print(f"load: {students} students' sentences, reference first; server logs in {tmp}", flush=True)
    reference = run_reference(texts[:students], args, tmp, deadline)
    log(reference)
    stages.append(reference)
    ref = reference_table(reference)
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.int8]
    for client, n, int8 in ([("protocol", n, m) for n in ns if n > 1 for m in modes]
                            + [("browser", n, False) for n in browser_ns]):
        if time.perf_counter() > deadline:
            print(f"  {client} N={n}{' int8' if int8 else ''}: skipped (time bound)")
            continue
        stage = run_class(client, n, texts, args, tmp, deadline, int8)
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
