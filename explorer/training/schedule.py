"""The learning-rate schedule and label smoothing of the paper, as pure functions.

The trainer calls `noam_rate` every step and the Schedule page plots `noam_curve`, so what the page
shows is exactly what the trainer does.
"""
from __future__ import annotations

import numpy as np


def noam_rate(step: int, d_model: int, factor: float = 1.0, warmup: int = 4000) -> float:
    """lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)  (paper, section 5.3).

    Rises linearly for `warmup` steps, peaks at step == warmup, then decays as 1/sqrt(step).
    Step 0 counts as step 1, so the first optimizer step never divides by zero or gets lr 0.
    """
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def noam_curve(steps: np.ndarray, d_model: int, factor: float = 1.0, warmup: int = 4000) -> np.ndarray:
    """`noam_rate` over an array of steps (float64, same shape as `steps`)."""
    s = np.maximum(np.asarray(steps, dtype=np.float64), 1.0)
    return factor * d_model ** -0.5 * np.minimum(s ** -0.5, s * float(warmup) ** -1.5)


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
