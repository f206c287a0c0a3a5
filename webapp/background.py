"""Long analyses (the head lab, the alignment scorecard) as background threads of the app's own
process, one per result file, with a progress bar and a Cancel button.

_JOBS (guarded by _LOCK) maps a result file to its Job; start() returns the running job instead of
starting a second one for the same file (two browser tabs asking for the same result share it). The
thread is a daemon; `work(job)` does the computing and writes the result file once, atomically, at
the end (both analyses use write_json_atomic), reporting through job.progress and stopping when
job.cancel is set (explorer.evaluation.progress: it raises Cancelled, and nothing is written). A job
that fails ends in a message on the page, never a traceback. Jobs run at the torch thread count the
app already uses ($EXPLORER_THREADS: torch.set_num_threads is process-wide), at a lower CPU priority
than the threads serving users (training.priority: nice is per thread on Linux).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import streamlit as st

from explorer.evaluation.progress import Cancelled


@dataclass
class Job:
    path: Path
    stages: tuple[str, ...]
    label: str                        # what the page calls it ("Head lab")
    cancel: threading.Event = field(default_factory=threading.Event)
    stage: str = "loading"
    done: int = 0
    total: int = 0
    state: str = "running"            # running | finished | cancelled | failed
    error: str = ""
    started: float = field(default_factory=time.time)
    thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def progress(self, stage: str, done: int, total: int) -> bool:
        """The explorer.evaluation.progress callback: records where the job is; False once cancelled."""
        self.stage, self.done, self.total = stage, done, total
        return not self.cancel.is_set()

    def fraction(self) -> float:
        """Overall progress: each stage an equal share (the stages' costs differ by checkpoint)."""
        if self.stage not in self.stages:
            return 0.0
        part = self.done / self.total if self.total else 0.0
        return min(1.0, (self.stages.index(self.stage) + part) / len(self.stages))


_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()


def job_for(path: Path) -> Job | None:
    with _LOCK:
        return _JOBS.get(str(path))


def start(path: Path, stages: tuple[str, ...], label: str, work: Callable[[Job], None]) -> Job:
    """Run work(job) in a thread for this result file, or return the job already running it."""
    with _LOCK:
        job = _JOBS.get(str(path))
        if job is not None and job.active:
            return job
        job = Job(path=Path(path), stages=stages, label=label)
        job.thread = threading.Thread(target=_run, args=(job, work), daemon=True, name=f"{label}-{Path(path).stem}")
        _JOBS[str(path)] = job
        job.thread.start()
    return job


def _run(job: Job, work: Callable[[Job], None]) -> None:
    from explorer.training.priority import lower_priority
    lower_priority(threading.get_native_id())         # this thread only: users' own requests come first
    from explorer.config import match_threads
    from explorer.decoding.compute_queue import background_thread
    match_threads()                                    # the app's torch thread count, in this thread too
    background_thread()                                # beside the users' queue, not in their places
    try:
        work(job)
        job.state = "finished"
    except Cancelled:
        job.state = "cancelled"
    except Exception as err:  # noqa: BLE001 - a failed job ends in a message on the page, never a traceback
        job.state, job.error = "failed", f"{type(err).__name__}: {err}"


def show_job(path: str, key: str) -> None:
    """The job's progress and Cancel button; meant to run in an st.fragment refreshed every 2 s while
    the job is active. When the job has ended, the whole page re-runs once (to draw the result)."""
    job = job_for(Path(path))
    if job is None:
        return
    if job.active:
        stage = job.stage if job.stage in job.stages else "loading the checkpoint"
        st.progress(job.fraction(), text=f"{job.label} running: {stage} {job.done}/{job.total or '?'} "
                                         f"({time.time() - job.started:.0f} s)")
        if job.cancel.is_set():
            st.caption("Cancelling…")
        elif st.button("Cancel", key=f"{key}_cancel"):
            job.cancel.set()
            st.caption("Cancelling…")
        return
    if job.state == "failed":
        st.error(f"The {job.label.lower()} failed: {job.error}")
    elif job.state == "cancelled":
        st.info(f"The {job.label.lower()} was cancelled; nothing was written.")
    seen = (path, job.state, job.started)
    if st.session_state.get(f"_{key}_seen") != seen:   # the job just ended: the whole page once, to draw
        st.session_state[f"_{key}_seen"] = seen          # the result and stop the fragment's 2 s refresh
        st.rerun()
