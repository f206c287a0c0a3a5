"""Seconds per stage of a long analysis, kept beside its result (the benchmark and the docs read
them; they are timings, not results: comparisons of two runs leave them out)."""
from __future__ import annotations

import time

TIMING_KEYS = ("seconds", "stage_seconds", "processes", "checks")   # a result's keys that say how it ran, not what


class StageClock:
    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.last = time.time()

    def lap(self, stage: str) -> None:
        """Close `stage`: the seconds since the previous lap (or the clock's start)."""
        now = time.time()
        self.seconds[stage] = round(now - self.last, 2)
        self.last = now
