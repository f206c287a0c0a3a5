"""The load benchmark's server: one `streamlit run app.py`, its CPU and resident memory read from /proc."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from benchmarks import browser as driver
from explorer.store.run_paths import RUNS_ENV

INT8_ENV = "EXPLORER_INT8"          # webapp.models.INT8_ENV (not imported: it would import streamlit here)


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


def start_server(tmp: Path, label: str, int8: bool = False):
    """A fresh `streamlit run app.py`; `int8`: with the server-wide default of a classroom on int8 weights
    (webapp.models.INT8_ENV: the Translate page translates on the model's int8 copy)."""
    env = {RUNS_ENV: str(tmp / "runs"), **({INT8_ENV: "1"} if int8 else {})}
    return driver.streamlit_server("app.py", env=env, log=tmp / f"streamlit-{label}.log", wait=240)
