"""The learning-rate schedule and label smoothing of the paper, as pure functions.

The trainer calls `noam_rate` every step and the Schedule page plots `noam_curve`, so what the page
shows is exactly what the trainer does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FINE_TUNE_WARMUP = 50           # steps: a fine-tune only has to re-warm Adam's moments, not the model
FINE_TUNE_PEAK_SHARE = 0.5      # the fine-tune's peak rate, as a share of the rate training ended at
# The peak for a checkpoint whose training left no record (an imported OPUS-MT model: neither its step
# nor its last rate survive the conversion). Hugging Face's course fine-tunes opus-mt models at 2e-5;
# Marian's transformer recipe, which OPUS-MT models are trained with, peaks at 3e-4 and decays as
# 1/sqrt(step) over hundreds of thousands of steps, so 2e-5 is at or below where such training ends.
UNRECORDED_PEAK = 2e-5
UNRECORDED_CEILING = 3e-4       # that recipe's peak: a fine-tune planned above it is warned about


def noam_rate(step: int, d_model: int, factor: float = 1.0, warmup: int = 4000) -> float:
    """lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)  (paper, section 5.3).

    Rises linearly for `warmup` steps, peaks at step == warmup, then decays as 1/sqrt(step).
    Step 0 counts as step 1, so the first optimizer step never divides by zero or gets lr 0.
    """
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


CURVE_POINTS = 2000     # a drawn schedule's steps at most: a run of 10 million steps is drawn from as many


def curve_steps(last: int, warmup: int | None = None, points: int = CURVE_POINTS) -> np.ndarray:
    """Steps 1..last to draw a schedule at: all of them up to `points`, else `points` spread evenly, with
    the warm-up's end (the peak) among them. Sized by `points`, never by `last` (a run's planned steps)."""
    last = max(int(last), 1)
    x = np.unique(np.linspace(1, last, min(points, last)).astype(np.int64))   # (<= points,)
    if warmup is not None and 1 <= warmup <= last:
        x = np.union1d(x, [warmup])
    return x


def noam_curve(steps: np.ndarray, d_model: int, factor: float = 1.0, warmup: int = 4000) -> np.ndarray:
    """`noam_rate` over an array of steps (float64, same shape as `steps`)."""
    s = np.maximum(np.asarray(steps, dtype=np.float64), 1.0)
    return factor * d_model ** -0.5 * np.minimum(s ** -0.5, s * float(warmup) ** -1.5)


@dataclass(frozen=True)
class FineTune:
    """Noam settings for continuing from a checkpoint, and why (the Train form proposes them)."""

    warmup: int
    lr_factor: float
    peak: float                 # the planned peak rate (at step == warmup)
    ended_at: float | None      # the rate the checkpoint's own training ended at; None: no record
    ended_at_known: bool        # False: estimated from its step alone (an upper bound), or no record


def fine_tune_schedule(training: dict, d_model: int) -> FineTune:
    """A short warm-up to a peak of half the rate the checkpoint's training ended at.

    Restarting the from-scratch schedule (a long warm-up to the paper's peak, ~3e-3 for d_model 128)
    throws a trained model far off: 300 such steps took numbers-en-de's dev BLEU from 100 to 89. The
    rate training ended at is the checkpoint's recorded `last_lr`, else the Noam rate at its recorded
    step with factor 1 and the warm-up over, which is at least as high as any factor-<=1 run ended at.
    A checkpoint with neither (an imported model: `training` says only where it was imported from)
    gets the fixed peak UNRECORDED_PEAK: the step-1 estimate would be d_model^-0.5 (0.044 for an
    OPUS-MT model), a rate that wrecks a trained model. The peak of noam_rate is
    factor * d_model^-0.5 * warmup^-0.5, solved here for the factor.
    """
    training = training if isinstance(training, dict) else {}
    recorded, step = training.get("last_lr"), training.get("step")
    known = _positive(recorded)
    if known:
        ended_at = float(recorded)
    elif _positive(step):
        ended_at = noam_rate(int(step), d_model, 1.0, warmup=1)
    else:
        ended_at = None
    peak = FINE_TUNE_PEAK_SHARE * ended_at if ended_at is not None else UNRECORDED_PEAK
    factor = peak * d_model ** 0.5 * FINE_TUNE_WARMUP ** 0.5
    return FineTune(warmup=FINE_TUNE_WARMUP, lr_factor=factor, peak=peak, ended_at=ended_at, ended_at_known=known)


def _positive(value) -> bool:
    """A usable number from an untrusted config.json: finite and > 0 (not a bool, not a string)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def label_smoothing_target(vocab_size: int, target: int, epsilon: float) -> np.ndarray:
    """The smoothed target distribution the loss compares the model with, shape [vocab_size].

    PyTorch's convention (cross_entropy(label_smoothing=eps), which the trainer uses): eps is spread
    uniformly over ALL V classes, the target included, so the target gets 1 - eps + eps/V and every
    other class eps/V. (The Annotated Transformer instead gives the target 1 - eps and the other V-1
    classes eps/(V-1), and zeroes the padding class; we follow the trainer so the page matches it.)
    """
    if not 0 <= target < vocab_size:
        raise ValueError(f"target {target} outside the vocabulary of {vocab_size}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError("epsilon must be in [0, 1]")
    dist = np.full(vocab_size, epsilon / vocab_size, dtype=np.float64)       # [V]
    dist[target] += 1.0 - epsilon
    return dist
