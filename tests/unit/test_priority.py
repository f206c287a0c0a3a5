"""Background work runs below the users: lowering one thread leaves the others (the app's users) as they were."""
import os
import threading

from explorer.runtime.priority import lower_priority
from support.waiting import join


def test_lowering_a_thread_leaves_the_rest_of_the_process_alone(monkeypatch):
    monkeypatch.delenv("EXPLORER_BACKGROUND_NICE", raising=False)
    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = {}

    def background():
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        lower_priority(tid)
        seen["delta"] = os.getpriority(os.PRIO_PROCESS, tid) - before
        seen["before"] = before

    t = threading.Thread(target=background)
    t.start()
    join(t, "the background thread")
    assert seen["delta"] == min(10, 19 - seen["before"])
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before


def test_zero_means_not_lowered_and_bad_values_are_ignored(monkeypatch):
    result = {}

    def background(value):
        monkeypatch.setenv("EXPLORER_BACKGROUND_NICE", value)
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        lower_priority(tid)
        result[value] = os.getpriority(os.PRIO_PROCESS, tid) - before

    for value in ("0", "lots"):
        t = threading.Thread(target=background, args=(value,))
        t.start()
        join(t, "the background thread")
    assert result == {"0": 0, "lots": 0}
