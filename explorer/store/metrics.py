"""A run's metrics.jsonl records as arrays: what the Train, Schedule and Checkpoints pages plot.

`curves_from_records` turns the records into arrays once (dropping records of steps that a resume
trained again), so every figure and the ETA read the same numbers; explorer.store.run_files.read_curves
reads a run's file into it. Plain data (numpy), so figure builders take it without reading files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Curves:
    """A run's logged metrics as arrays (train records every few steps, eval records less often)."""

    step: np.ndarray = field(default_factory=lambda: np.zeros(0))
    loss: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ppl: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lr: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tokens_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    elapsed: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eval_step: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dev_loss: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dev_ppl: np.ndarray = field(default_factory=lambda: np.zeros(0))
    bleu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    chrf: np.ndarray = field(default_factory=lambda: np.zeros(0))
    samples: list = field(default_factory=list)      # the latest eval's [{src, ref, hyp}]

    def eta_seconds(self, total_steps: int | None) -> float | None:
        """Remaining time at the pace of the latest stretch of logged steps (evals included)."""
        if not total_steps or len(self.step) < 2:
            return None
        start = max(0, len(self.step) - 20)
        span = self.elapsed[-1] - self.elapsed[start]
        steps = self.step[-1] - self.step[start]
        if steps <= 0 or span <= 0:
            return None
        return float(max(0, total_steps - self.step[-1]) * span / steps)


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _latest_segment(records: list[dict]) -> list[dict]:
    """Keep, per step, the record of the latest segment: a resume restarts below the last step."""
    kept: list[dict] = []
    for rec in records:
        if not isinstance(rec.get("step"), (int, float)):
            continue
        while kept and kept[-1]["step"] >= rec["step"]:
            kept.pop()
        kept.append(rec)
    return kept


def curves_from_records(records: Sequence[dict]) -> Curves:
    """Arrays from metrics.jsonl records (malformed values become NaN, never an exception)."""
    train = _latest_segment([r for r in records if r.get("kind") == "train"])
    evals = _latest_segment([r for r in records if r.get("kind") == "eval"])
    # elapsed restarts at 0 when a run resumes: make it cumulative so the ETA pace stays right
    elapsed, offset, last = [], 0.0, 0.0
    for r in train:
        e = _num(r.get("elapsed"))
        if e < last:
            offset += last
        last = e
        elapsed.append(e + offset)

    def col(recs, key):
        return np.array([_num(r.get(key)) for r in recs], dtype=np.float64)

    samples = next((r["samples"] for r in reversed(evals) if isinstance(r.get("samples"), list)), [])
    return Curves(step=col(train, "step"), loss=col(train, "loss"), ppl=col(train, "ppl"), lr=col(train, "lr"),
                  tokens_per_s=col(train, "tokens_per_s"), elapsed=np.array(elapsed, dtype=np.float64),
                  eval_step=col(evals, "step"), dev_loss=col(evals, "dev_loss"), dev_ppl=col(evals, "dev_ppl"),
                  bleu=col(evals, "bleu"), chrf=col(evals, "chrf"),
                  samples=[s for s in samples if isinstance(s, dict)])
