"""The app's background analyses (webapp.background) are capped: per kind one runs in the whole
server and the rest wait in arrival order, a browser session holds at most MAX_PER_USER of them
(running + waiting), and at most MAX_QUEUED wait in all; beyond either bound a request is refused with
a message. Why: each analysis loads its own copy of the checkpoint and computes for minutes; one
browser could otherwise start 8 head labs at once (25 server threads, every page slower) and three
alignment scorecards took the server from 0.68 to 6.5 GB.

The work functions here are fakes held by threading.Events: no model is loaded.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from explorer.runtime.progress import Cancelled
from support.waiting import STALL_S
from webapp import background

LAB, SCORECARD = "Head lab", "Alignment scorecard"
STAGES = ("one",)
WAIT = STALL_S        # every wait here ends when another thread sets an event: the bound is a hang guard only


class Gate:
    """A fake analysis: records that it ran, then holds until released (or cancelled)."""

    def __init__(self, hold_bytes: int = 0):
        self.release = threading.Event()
        self.entered = threading.Event()
        self.runs = 0
        self.hold_bytes = hold_bytes

    def __call__(self, job: background.Job) -> None:
        self.runs += 1
        held = bytearray(b"\x01") * self.hold_bytes if self.hold_bytes else None   # written: resident
        self.entered.set()
        while not self.release.wait(0.01):
            if not job.progress("one", 0, 1):
                raise Cancelled()
        del held
        job.progress("one", 1, 1)


@pytest.fixture(autouse=True)
def board(monkeypatch):
    """A fresh job table per test; every job this test started is ended before the next one."""
    jobs: dict[str, background.Job] = {}
    monkeypatch.setattr(background, "_JOBS", jobs)
    yield jobs
    for job in list(jobs.values()):
        background.cancel(job)
    for job in list(jobs.values()):
        assert job.wait(WAIT), f"{job.path} did not end"


def start(tmp_path: Path, name: str, gate: Gate, user: str, label: str = LAB) -> background.Job:
    return background.start(tmp_path / f"{name}.json", STAGES, label, gate, user=user)


def test_a_second_job_of_a_kind_waits_until_the_first_ends_then_runs(tmp_path):
    first, second = Gate(), Gate()
    a = start(tmp_path, "a", first, "alice")
    b = start(tmp_path, "b", second, "bob")
    assert first.entered.wait(WAIT)
    assert a.state == "running" and b.state == "queued" and b.active
    assert background.ahead(b) == 1
    time.sleep(0.2)
    assert second.runs == 0                                    # still waiting while the first runs
    first.release.set()
    assert a.wait(WAIT) and a.state == "finished"
    assert second.entered.wait(WAIT)                           # then it runs, without anyone asking again
    assert b.state == "running" and background.ahead(b) == 0
    second.release.set()
    assert b.wait(WAIT) and b.state == "finished" and not b.active


def test_a_failed_job_lets_the_next_one_run(tmp_path):
    def broken(job):
        raise RuntimeError("out of memory")

    after = Gate()
    a = background.start(tmp_path / "a.json", STAGES, LAB, broken, user="alice")
    b = start(tmp_path, "b", after, "bob")
    assert a.wait(WAIT) and a.state == "failed" and "out of memory" in a.error
    assert after.entered.wait(WAIT)
    after.release.set()
    assert b.wait(WAIT) and b.state == "finished"


def test_ended_jobs_are_forgotten_past_a_bound_oldest_first(tmp_path, monkeypatch):
    """Every job asked for stayed in the table for the server's life."""
    monkeypatch.setattr(background, "MAX_ENDED_KEPT", 3)
    jobs = []
    for i in range(6):
        jobs.append(background.start(tmp_path / f"{i}.json", STAGES, LAB, lambda job: None, user=f"u{i}"))
        assert jobs[-1].wait(WAIT) and jobs[-1].state == "finished"
    running = start(tmp_path, "running", Gate(), "someone")
    assert background.job_for(tmp_path / "running.json") is running
    assert [background.job_for(tmp_path / f"{i}.json") for i in range(6)] == [None] * 3 + jobs[3:]


def test_a_cancelled_job_says_which_stages_it_kept_when_each_writes_its_own():
    """The dictionaries' job (a dictionary per layer, each written when done) said 'nothing was written'
    after a cancel with two layers' dictionaries on disk."""
    stages = ("Encoder layer 1", "Encoder layer 2", "Decoder layer 1")
    job = background.Job(path=Path("x.json"), stages=stages, label="Dictionaries", keeps_stages=True,
                         stage="Decoder layer 1")
    assert background.cancelled_said(job) == ("what it had finished is kept (Encoder layer 1, Encoder layer 2); "
                                              "nothing of Decoder layer 1 was written.")
    job.stage = "Encoder layer 1"
    assert background.cancelled_said(job) == "nothing was written."
    one_result = background.Job(path=Path("y.json"), stages=stages, label=LAB, stage="Decoder layer 1")
    assert background.cancelled_said(one_result) == "nothing was written."      # written once, at the end


def test_the_bar_and_the_time_left_weigh_each_stage_by_its_share_of_the_work(monkeypatch):
    """The encoder-state map's bar stood at half and said "about 27 s left" with its 50,000 training sentences
    encoded: the held-out stage after them is 1,000 sentences, not as many again."""
    stages = ("training sentences", "held-out sentences")
    job = background.Job(path=Path("x.json"), stages=stages, label="Encoder-state map", shares=(50_000, 1_000),
                         stage="training sentences", done=50_000, total=50_000, started=1_000.0)
    now = [1_100.0]                                                               # 100 s so far
    monkeypatch.setattr(background.time, "time", lambda: now[0])
    assert job.fraction() == pytest.approx(50 / 51)
    assert background.time_left(job) == ", about 2 seconds left"                 # not "about 2 minutes"
    now[0] = 1_027.0
    assert background.time_left(job) == ", under a second left"                  # not "about under a second"
    job.stage, job.done, job.total = "held-out sentences", 500, 1_000
    assert job.fraction() == pytest.approx(50.5 / 51)
    equal = background.Job(path=Path("y.json"), stages=stages, label=LAB, stage="training sentences",
                           done=50_000, total=50_000)
    assert equal.fraction() == 0.5                                                # no shares: equal ones
    assert background.Job(path=Path("z.json"), stages=stages, label=LAB, shares=(1.0,), stage="held-out sentences",
                          done=1, total=2).fraction() == 0.75                     # shares that do not fit: equal
    assert background.Job(path=Path("n.json"), stages=stages, label=LAB, shares=(-1.0, 2.0), stage="training sentences",
                          done=1, total=2).fraction() == 0.25                     # a negative share: equal ones


def test_jobs_of_different_kinds_run_at_once(tmp_path):
    lab, card = Gate(), Gate()
    a = start(tmp_path, "a", lab, "alice", LAB)
    b = start(tmp_path, "b", card, "bob", SCORECARD)
    assert lab.entered.wait(WAIT) and card.entered.wait(WAIT)
    assert a.state == b.state == "running"


def test_a_third_job_of_one_user_is_refused(tmp_path):
    assert background.MAX_PER_USER == 2
    gates = [Gate() for _ in range(4)]
    a = start(tmp_path, "a", gates[0], "alice", LAB)
    b = start(tmp_path, "b", gates[1], "alice", SCORECARD)
    c = start(tmp_path, "c", gates[2], "alice", LAB)
    assert a.active and b.active
    assert c.state == "refused" and not c.active
    assert "2" in c.error and "cancel" in c.error.lower()
    assert background.job_for(tmp_path / "c.json") is None     # nothing kept for it, nothing run
    time.sleep(0.2)
    assert gates[2].runs == 0
    d = start(tmp_path, "d", gates[3], "bob", LAB)             # another session is not held back by alice's
    assert d.state == "queued"
    gates[0].release.set()
    assert a.wait(WAIT)
    again = start(tmp_path, "c", gates[2], "alice", LAB)       # one of hers ended: she may start another
    assert d.state == "running"                                # bob's came first: it has the place
    assert again.state == "queued" and background.ahead(again) == 1


def test_cancel_of_a_queued_job_removes_it_and_it_never_runs(tmp_path):
    gates = [Gate() for _ in range(3)]
    a = start(tmp_path, "a", gates[0], "alice")
    b = start(tmp_path, "b", gates[1], "bob")
    c = start(tmp_path, "c", gates[2], "carol")
    assert background.ahead(c) == 2
    background.cancel(b)
    assert b.state == "cancelled" and not b.active and b.wait(0)
    assert background.ahead(c) == 1                            # one fewer ahead of the next in line
    gates[0].release.set()
    assert gates[2].entered.wait(WAIT)
    gates[2].release.set()
    assert c.wait(WAIT) and c.state == "finished"
    assert gates[1].runs == 0 and b.state == "cancelled"
    assert not (tmp_path / "b.json").exists()


def test_a_full_queue_refuses_a_new_request(tmp_path):
    assert background.MAX_QUEUED == 8
    gates = [Gate() for _ in range(background.MAX_QUEUED + 3)]
    jobs = [start(tmp_path, f"j{i}", gates[i], f"user{i}") for i in range(background.MAX_QUEUED + 1)]
    assert [j.state for j in jobs] == ["running"] + ["queued"] * background.MAX_QUEUED
    late = start(tmp_path, "late", gates[-2], "latecomer")
    assert late.state == "refused" and str(background.MAX_QUEUED) in late.error
    other = start(tmp_path, "other", gates[-1], "latecomer", SCORECARD)   # its kind is idle: it runs now
    assert other.state == "running"


def test_two_sessions_asking_for_one_result_file_share_one_job(tmp_path):
    first, unused = Gate(), Gate()
    a = start(tmp_path, "same", first, "alice")
    b = start(tmp_path, "same", unused, "bob")
    assert b is a
    first.release.set()
    assert a.wait(WAIT) and first.runs == 1 and unused.runs == 0


def test_without_a_streamlit_session_the_user_is_local(tmp_path, monkeypatch):
    assert background.current_user() == "local"
    gates = [Gate() for _ in range(3)]
    jobs = [background.start(tmp_path / f"{i}.json", STAGES, LAB, gates[i]) for i in range(3)]
    assert [j.state for j in jobs] == ["running", "queued", "refused"]


def _page(paths: list[str]) -> None:
    """A page that starts three analyses in one session on its first run, then shows each one's job."""
    from pathlib import Path as P

    import streamlit as st

    from webapp import background as bg

    def held(job):
        while not job.cancel.wait(0.01):
            pass
        raise bg.Cancelled()

    if "started" not in st.session_state:
        st.session_state.started = True
        for path in paths:
            bg.start(P(path), ("one",), "Head lab", held)
    for path in paths:
        bg.show_job(path, P(path).stem)


def test_the_page_says_how_many_are_ahead_and_why_a_request_was_refused(tmp_path):
    from streamlit.testing.v1 import AppTest

    before = Gate()
    start(tmp_path, "before", before, "someone else")
    paths = [str(tmp_path / f"p{i}.json") for i in range(3)]
    at = AppTest.from_function(_page, args=(paths,), default_timeout=WAIT).run()
    assert not at.exception
    texts = [p.proto.text for p in at.get("progress")]
    assert any("waiting: 1 analysis ahead of it" in t for t in texts), texts
    assert any("waiting: 2 analyses ahead of it" in t for t in texts), texts
    assert background.job_for(Path(paths[2])) is None
    assert any("at most 2" in w.value for w in at.warning), [w.value for w in at.warning]
    at.button(key="p0_cancel").click()
    at.run()
    assert background.job_for(Path(paths[0])).state == "cancelled"


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmRSS from /proc")
def test_eight_analyses_from_eight_sessions_hold_the_memory_of_one(tmp_path):
    """A memory bound, not a timing: 8 fake analyses of one kind each hold 200 MB while running.
    Uncapped they would hold 8 x 200 MB at once; with one running per kind the process grows by
    about one of them."""
    size, n = 200 * 2**20, 8
    gates = [Gate(hold_bytes=size) for _ in range(n)]
    warm = background.start(tmp_path / "warm.json", STAGES, LAB, lambda job: None, user="warm-up")
    assert warm.wait(WAIT)                                       # what a job's thread imports is not counted
    base = _rss_bytes()
    jobs = [start(tmp_path, f"m{i}", gates[i], f"session{i}") for i in range(n)]
    peak = base
    for gate, job in zip(gates, jobs):
        assert gate.entered.wait(WAIT)
        for _ in range(5):                                     # while it holds its 200 MB
            peak = max(peak, _rss_bytes())
            time.sleep(0.02)
        gate.release.set()
        assert job.wait(WAIT) and job.state == "finished", job.error
    growth = peak - base
    print(f"peak RSS growth {growth / 2**20:.0f} MiB for {n} jobs of {size / 2**20:.0f} MiB "
          f"(uncapped: {n * size / 2**20:.0f} MiB)")
    assert size * 0.9 < growth < 2 * size + 100 * 2**20
