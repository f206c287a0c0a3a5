"""The tests' wait helper (tests/support/waiting.py): it returns as soon as the work is done, gives up only
when the work's progress signal stood still for the whole stall window, and says then that a hang guard
fired; a watched subprocess counts its output as progress and is killed when it stalls."""
from __future__ import annotations

import itertools
import os
import sys

import pytest

from support import waiting
from support.waiting import Stalled, run_watched, tree_signature, wait_until


def test_returns_the_first_truthy_value_of_done():
    polls = itertools.count()
    assert wait_until(lambda: next(polls) >= 3 and "done", "three polls", poll=0) == "done"


def test_progress_keeps_the_wait_going_past_any_stall_window():
    steps = itertools.count()                       # every look at the progress sees it moved
    seen = []
    assert wait_until(lambda: len(seen) > 20, "twenty steps", progress=lambda: seen.append(1) or next(steps),
                      stall=0, poll=0, look_every=0)


def test_no_progress_for_the_window_fails_and_says_it_was_a_hang_guard():
    with pytest.raises(Stalled, match="no progress for 0 s .*a hang guard, not a timing goal"):
        wait_until(lambda: False, "nothing", progress=lambda: 7, stall=0, poll=0, look_every=0)


def test_check_ends_the_wait_when_the_worker_died():
    def died():
        raise AssertionError("the worker exited")

    with pytest.raises(AssertionError, match="the worker exited"):
        wait_until(lambda: False, "a dead worker", check=died, poll=0)


def test_a_watched_subprocess_returns_its_output_and_exit_status():
    code = "import sys\nfor i in range(3): print(i, flush=True)\nprint('warned', file=sys.stderr)\nsys.exit(3)"
    done = run_watched([sys.executable, "-c", code], "a short script")
    assert (done.returncode, done.stdout, done.stderr) == (3, "0\n1\n2\n", "warned\n")


def test_a_silent_subprocess_is_killed_when_it_stalls():
    """It blocks reading a stdin that never ends: no output, no files, no exit, until it is killed."""
    import subprocess

    with pytest.raises(Stalled, match="(?s)a blocked script: no progress for 0.5 s .*started.*--- stderr ---"):
        run_watched([sys.executable, "-c", "import sys; print('started', flush=True); sys.stdin.read()"],
                    "a blocked script", stall=0.5, stdin=subprocess.PIPE)


def test_a_folder_that_vanishes_while_the_tree_is_read_is_skipped(tmp_path, monkeypatch):
    """A trainer renames its checkpoint's temp folder into place while the wait reads the run folder:
    the folder listed a moment ago is gone when it is opened. The signature skips it, sees the rest."""
    (tmp_path / "metrics.jsonl").write_text("{}")
    (tmp_path / "checkpoints" / ".step_20.tmp").mkdir(parents=True)
    real_scandir = os.scandir

    def vanishing(path="."):
        if str(path).endswith(".tmp"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)

    monkeypatch.setattr(waiting.os, "scandir", vanishing)
    names = [entry[0] for entry in tree_signature(tmp_path)]
    assert str(tmp_path / "metrics.jsonl") in names
