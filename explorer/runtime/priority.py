"""Background work runs below the users: a lower CPU priority for trainers and analysis threads.

On two cores, a training job or a head lab computing flat out would take half the CPU from students
clicking in the app. Linux keeps a nice value per thread (threads started later inherit it), so a
trainer process and one analysis thread inside the app's process can each be lowered alone.
"""
from __future__ import annotations

import os

NICE_ENV = "EXPLORER_BACKGROUND_NICE"     # how much lower background work runs (default 10; 0 = not lowered)


def lower_priority(pid: int, step: int | None = None) -> None:
    """Give a background computation (a trainer process, an analysis thread: Linux sets nice per
    thread, and threads started later inherit it) a lower CPU priority, $EXPLORER_BACKGROUND_NICE
    (default 10), so users' clicks in the app come first when the cores are busy. Best effort: where
    the system refuses, the job runs at normal priority."""
    try:
        step = int(os.environ.get(NICE_ENV, "10")) if step is None else step
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + max(0, step)))
    except (OSError, ValueError, AttributeError):
        pass
