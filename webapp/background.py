"""Long analyses (the head lab, the alignment scorecard) as background threads of the app's own
process, one per result file, with a progress bar and a Cancel button; capped per server and per user.

_JOBS (guarded by _LOCK) maps a result file to its Job; start() returns the job already running or
waiting for that file instead of starting a second one (two browser tabs asking for the same result
share it). `work(job)` does the computing in a daemon thread and writes the result file once,
atomically, at the end (both analyses use write_json_atomic), reporting through job.progress and
stopping when job.cancel is set (explorer.runtime.progress: it raises Cancelled, and nothing is
written). A job that fails ends in a message on the page, never a traceback. Jobs run at the torch
thread count the app already uses ($EXPLORER_THREADS: torch.set_num_threads is process-wide), at a
lower CPU priority than the threads serving users (runtime.priority: nice is per thread on Linux).

The caps, because each analysis loads its own copy of the checkpoint and computes for minutes (one
browser started 8 head labs in 40 s: 10 more server threads, every page slower; three alignment
scorecards took the server from 0.68 to 6.5 GB): per kind (the label) MAX_RUNNING_PER_KIND runs in
the whole server and the rest wait in arrival order ("queued", no thread yet: the job that ends starts
the next one of its kind); a browser session (Streamlit's session id, "local" outside a session)
holds at most MAX_PER_USER jobs running or waiting; at most MAX_QUEUED wait in all. A request beyond
either bound comes back as a Job in state "refused" whose error says why; it is not kept in _JOBS (no
other session sees it), and the session's next show_job for that file shows the message. Cancel on a
waiting job takes it out of the line at once: it never runs and writes nothing.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer.runtime.progress import Cancelled
from webapp.text_safety import md_escape

MAX_RUNNING_PER_KIND = 1      # per label, in the whole server: one copy of the checkpoint per kind at a time
MAX_PER_USER = 2              # running + waiting, per browser session
MAX_QUEUED = 8                # waiting, in the whole server
MAX_ENDED_KEPT = 64           # ended jobs remembered (their message for the page), the oldest forgotten first
LOCAL_USER = "local"          # the user outside a Streamlit session (scripts, tests)
_REFUSED = "_background_refused"   # session_state: result file -> why this session's request was refused
_ARRIVAL = itertools.count()


@dataclass
class Job:
    path: Path
    stages: tuple[str, ...]
    label: str                        # what the page calls it ("Head lab"); also its kind for the cap
    cancel: threading.Event = field(default_factory=threading.Event)
    stage: str = "loading"
    done: int = 0
    total: int = 0
    state: str = "new"                # new | queued | running | finished | cancelled | failed | refused
    error: str = ""                   # why it failed, or why it was refused
    started: float = field(default_factory=time.time)   # when it started running (or was asked for)
    thread: threading.Thread | None = None                # None while queued
    user: str = LOCAL_USER
    arrival: int = field(default_factory=lambda: next(_ARRIVAL))
    ended: threading.Event = field(default_factory=threading.Event)
    work: Callable[[Job], None] | None = field(default=None, repr=False)   # a queued job's, until it runs
    keeps_stages: bool = False        # each stage writes its own result (one dictionary per layer), kept on cancel
    shares: tuple[float, ...] = ()    # each stage's share of the work, when known (else equal shares)

    def __post_init__(self) -> None:
        """Shares that cannot weigh these stages (another count, a negative one, none above 0) are equal ones."""
        shares = tuple(float(s) for s in self.shares)
        usable = len(shares) == len(self.stages) and all(s >= 0 for s in shares) and sum(shares) > 0
        self.shares = shares if usable else (1.0,) * len(self.stages)

    @property
    def active(self) -> bool:
        """Running or waiting: the page shows its progress and Cancel, not a Start button."""
        return self.state in ("queued", "running")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job has ended (finished, cancelled, failed or refused); False on timeout."""
        return self.ended.wait(timeout)

    def progress(self, stage: str, done: int, total: int) -> bool:
        """The explorer.runtime.progress callback: records where the job is; False once cancelled."""
        self.stage, self.done, self.total = stage, done, total
        return not self.cancel.is_set()

    def fraction(self) -> float:
        """Overall progress: each stage its share of the work (`shares`, e.g. the sentences each encodes), else
        an equal share (the stages' costs differ by checkpoint)."""
        if self.stage not in self.stages:
            return 0.0
        part = self.done / self.total if self.total else 0.0
        k = self.stages.index(self.stage)
        return min(1.0, max(0.0, (sum(self.shares[:k]) + self.shares[k] * part) / sum(self.shares)))


_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()


def job_for(path: Path) -> Job | None:
    with _LOCK:
        return _JOBS.get(str(path))


def current_user() -> str:
    """The browser session calling: its Streamlit session id, or LOCAL_USER outside a script run."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else LOCAL_USER


def start(path: Path, stages: tuple[str, ...], label: str, work: Callable[[Job], None],
          user: str | None = None, keeps_stages: bool = False, shares: tuple[float, ...] = ()) -> Job:
    """Run work(job) in a thread for this result file, or return the job already running or waiting
    for it. `shares`: each stage's share of the work, when the caller knows it (the bar and the time left
    go by it). It runs now if fewer than MAX_RUNNING_PER_KIND of its kind run, else waits in line; a
    request past MAX_PER_USER for `user` (default: the calling session) or past MAX_QUEUED waiting is
    refused: the Job returned has state "refused" and the reason in .error, and nothing runs."""
    user = current_user() if user is None else user
    with _LOCK:
        job = _JOBS.get(str(path))
        if job is not None and job.active:
            return job
        _forget_ended()
        job = Job(path=Path(path), stages=stages, label=label, user=user, keeps_stages=keeps_stages, shares=shares)
        reason = _refusal(job)
        if reason:
            job.state, job.error = "refused", reason
            job.ended.set()
        elif _running(label) < MAX_RUNNING_PER_KIND:
            _JOBS[str(path)] = job
            _launch(job, work)
        else:
            job.state, job.work = "queued", work
            _JOBS[str(path)] = job
    if reason:
        _note_refusal(job)
    return job


def _forget_ended() -> None:
    """Under _LOCK: keep at most MAX_ENDED_KEPT ended jobs, forgetting the oldest: each one asked for stayed
    for the server's life (a table that only grows). A forgotten job's result file stays; its page then
    shows the result, or (a failure's message gone) the button to start it again."""
    ended = sorted((j for j in _JOBS.values() if not j.active), key=lambda j: j.arrival)
    for job in ended[:max(0, len(ended) - MAX_ENDED_KEPT)]:
        del _JOBS[str(job.path)]


def _refusal(job: Job) -> str:
    """Why this request may not run or wait ("" if it may). Under _LOCK."""
    mine = sum(1 for j in _JOBS.values() if j.active and j.user == job.user)
    if mine >= MAX_PER_USER:
        return (f"You already have {mine} analyses running or waiting (at most {MAX_PER_USER} per browser "
                "session): cancel one or wait until one has finished, then start this one.")
    if _running(job.label) >= MAX_RUNNING_PER_KIND and _queued() >= MAX_QUEUED:
        return (f"{MAX_QUEUED} analyses are already waiting on this server (at most {MAX_QUEUED}): "
                "try again when one has finished.")
    return ""


def _running(label: str) -> int:
    return sum(1 for j in _JOBS.values() if j.state == "running" and j.label == label)


def _queued() -> int:
    return sum(1 for j in _JOBS.values() if j.state == "queued")


def ahead(job: Job) -> int:
    """How many analyses of its kind run or wait before this one (0 once it runs)."""
    with _LOCK:
        if job.state != "queued":
            return 0
        return sum(1 for j in _JOBS.values() if j.label == job.label
                   and (j.state == "running" or (j.state == "queued" and j.arrival < job.arrival)))


def cancel(job: Job) -> None:
    """Cancel: a waiting job leaves the line at once (it never runs, nothing is written); a running
    one stops at its next progress report."""
    with _LOCK:
        job.cancel.set()
        if job.state == "queued":
            job.state, job.work = "cancelled", None
            job.ended.set()


def _launch(job: Job, work: Callable[[Job], None]) -> None:
    """Under _LOCK: the job runs now, in a thread of its own."""
    job.state, job.started = "running", time.time()
    job.thread = threading.Thread(target=_run, args=(job, work), daemon=True,
                                  name=f"{job.label}-{job.path.stem}")
    job.thread.start()


def _next(label: str) -> None:
    """Under _LOCK: start the waiting jobs of this kind that now have room, first come first."""
    waiting = sorted((j for j in _JOBS.values() if j.state == "queued" and j.label == label),
                     key=lambda j: j.arrival)
    for job in waiting:
        if _running(label) >= MAX_RUNNING_PER_KIND:
            return
        work, job.work = job.work, None
        if job.cancel.is_set():                     # cancelled while waiting without cancel()
            job.state = "cancelled"
            job.ended.set()
            continue
        _launch(job, work)


def _run(job: Job, work: Callable[[Job], None]) -> None:
    try:
        from explorer.runtime.priority import lower_priority
        lower_priority(threading.get_native_id())         # this thread only: users' own requests come first
        from explorer.runtime.device import match_threads
        from explorer.runtime.compute_queue import background_thread
        match_threads()                                    # the app's torch thread count, in this thread too
        background_thread()                                # beside the users' queue, not in their places
        work(job)
        state = "finished"
    except Cancelled:
        state = "cancelled"
    except BaseException as err:  # noqa: BLE001 - a failed job ends in a message on the page, never a traceback
        state, job.error = "failed", f"{type(err).__name__}: {err}"
    with _LOCK:                                            # its place goes to the next one in line
        job.state = state
        job.ended.set()
        _next(job.label)


def _note_refusal(job: Job) -> None:
    """Keep the reason for the calling session's next show_job of this file (pages call start() and
    then show_job, and need no change to show it)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return
    st.session_state.setdefault(_REFUSED, {})[str(job.path)] = job.error


def _pop_refusal(path: str) -> str:
    if get_script_run_ctx(suppress_warning=True) is None:
        return ""
    return st.session_state.get(_REFUSED, {}).pop(str(path), "")


def _count(n: int) -> str:
    return f"{n} analysis" if n == 1 else f"{n} analyses"


def time_left(job: Job) -> str:
    """", about 2 minutes left": the time so far stretched over what is left at the pace so far (each stage its
    share, as the bar counts them); "" before there is a pace to go by."""
    from webapp.estimates import duration

    spent, part = time.time() - job.started, job.fraction()
    if not 0.02 <= part < 1 or spent < 2:
        return ""
    left = spent * (1 - part) / part
    return ", under a second left" if left < 1 else f", about {duration(left)} left"


def cancelled_said(job: Job) -> str:
    """What a cancelled job left: nothing, or (a job whose stages each write their result) the stages it
    had finished, kept."""
    done = job.stages[:job.stages.index(job.stage)] if job.keeps_stages and job.stage in job.stages else ()
    if not done:
        return "nothing was written."
    return f"what it had finished is kept ({', '.join(done)}); nothing of {job.stage} was written."


def show_job(path: str, key: str) -> None:
    """The job's progress (or its place in line) and Cancel button; meant to run in an st.fragment
    refreshed every 2 s while the job is active. When the job has ended, the whole page re-runs once
    (to draw the result). A request of this session refused by start() shows why, once."""
    job = job_for(Path(path))
    if job is not None and job.active:
        if job.state == "queued":
            st.progress(0.0, text=f"{job.label} waiting: {_count(ahead(job))} ahead of it "
                                  f"({time.time() - job.started:.0f} s)")
        else:
            stage = job.stage if job.stage in job.stages else "loading the checkpoint"
            st.progress(job.fraction(), text=f"{job.label} running: {stage} {job.done}/{job.total or '?'} "
                                             f"({time.time() - job.started:.0f} s{time_left(job)})")
        if job.cancel.is_set():
            st.caption("Cancelling…")
        elif st.button("Cancel", key=f"{key}_cancel"):
            cancel(job)
            st.caption("Cancelling…")
        return
    if job is not None:
        if job.state == "failed":
            st.error(f"The {job.label.lower()} failed: {md_escape(job.error)}")    # may quote a file
        elif job.state == "cancelled":
            st.info(f"The {job.label.lower()} was cancelled; {cancelled_said(job)}")
        seen = (path, job.state, job.started)
        if st.session_state.get(f"_{key}_seen") != seen:   # the job just ended: the whole page once, to draw
            st.session_state[f"_{key}_seen"] = seen          # the result and stop the fragment's 2 s refresh
            st.rerun()
    refused = _pop_refusal(path)
    if refused:
        st.warning(refused)
