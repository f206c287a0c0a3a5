"""The Noam learning-rate schedule and the label-smoothing target: pure functions, known values."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.training.schedule import (CURVE_POINTS, FINE_TUNE_PEAK_SHARE, UNRECORDED_PEAK, curve_steps,
                                        fine_tune_schedule, label_smoothing_target, noam_curve, noam_rate)


def test_noam_matches_hand_computed_values():
    # d=512, warmup=4000: peak 512^-0.5 * 4000^-0.5 = 1 / sqrt(2,048,000) = 6.9877e-4
    assert noam_rate(4000, 512) == pytest.approx(6.98771242e-4, rel=1e-8)
    assert noam_rate(1, 512) == pytest.approx(512 ** -0.5 * 4000 ** -1.5, rel=1e-12)   # 1.7469e-7
    assert noam_rate(100, 512) == pytest.approx(1.74692811e-5, rel=1e-8)               # warmup: linear
    assert noam_rate(16000, 512) == pytest.approx(3.49385621e-4, rel=1e-8)             # 4x warmup: half peak
    assert noam_rate(400, 256, factor=2.0, warmup=400) == pytest.approx(2 / 16 / 20, rel=1e-12)
    assert noam_rate(0, 512) == noam_rate(1, 512) > 0                                   # step 0 never divides by 0


@pytest.mark.parametrize("d_model,warmup", [(512, 4000), (512, 8000), (256, 4000), (128, 400)])
def test_noam_peaks_at_warmup(d_model, warmup):
    steps = np.arange(0, 5 * warmup)
    curve = noam_curve(steps, d_model, warmup=warmup)
    assert int(steps[np.argmax(curve)]) == warmup
    assert np.all(np.diff(curve[1:warmup + 1]) > 0) and np.all(np.diff(curve[warmup:]) < 0)
    scalar = [noam_rate(int(s), d_model, warmup=warmup) for s in steps[::97]]
    np.testing.assert_allclose(curve[::97], scalar, rtol=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_target_is_a_distribution_matching_pytorch(eps):
    V, target = 11, 4
    dist = label_smoothing_target(V, target, eps)
    assert dist.shape == (V,) and dist.sum() == pytest.approx(1.0, abs=1e-12)
    assert dist[target] == pytest.approx(1 - eps + eps / V) and dist[0] == pytest.approx(eps / V)
    # the trainer's loss: cross_entropy(label_smoothing=eps) == cross-entropy against this distribution
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ours = -(torch.from_numpy(dist) * torch.log_softmax(logits, -1)).sum()
    theirs = F.cross_entropy(logits, torch.tensor([target]), label_smoothing=eps)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-10)
    with pytest.raises(ValueError):
        label_smoothing_target(V, V, eps)


def _planned_peak(recipe, d_model: int) -> float:
    """The peak noam_rate reaches with the recipe's settings (at step == warmup)."""
    return noam_rate(recipe.warmup, d_model, recipe.lr_factor, recipe.warmup)


@pytest.mark.parametrize("d_model", [128, 512])
def test_fine_tuning_peaks_at_half_the_recorded_rate(d_model):
    recipe = fine_tune_schedule({"step": 900, "last_lr": 4e-4}, d_model)
    assert recipe.ended_at == 4e-4 and recipe.ended_at_known
    assert recipe.peak == pytest.approx(FINE_TUNE_PEAK_SHARE * 4e-4)
    assert _planned_peak(recipe, d_model) == pytest.approx(recipe.peak, rel=1e-9)


def test_fine_tuning_without_a_recorded_rate_estimates_it_from_the_step():
    recipe = fine_tune_schedule({"step": 900}, 128)
    assert not recipe.ended_at_known
    assert recipe.ended_at == pytest.approx(128 ** -0.5 * 900 ** -0.5)            # factor 1, warm-up over
    assert recipe.peak == pytest.approx(FINE_TUNE_PEAK_SHARE * recipe.ended_at)


@pytest.mark.parametrize("training", [
    {"imported_from": "Helsinki-NLP/opus-mt-es-en"}, {}, {"dataset": "none (random weights)", "preset": "base"},
    {"step": "900", "last_lr": "1e-4"}, {"step": True, "last_lr": True}, {"step": -5, "last_lr": 0},
    {"step": 0}, {"last_lr": float("nan")}, {"last_lr": float("inf")}, None, [],
])
def test_a_checkpoint_with_no_usable_record_gets_the_fixed_peak(training):
    """An imported model records neither its step nor its rate; the step-1 estimate (d_model^-0.5, 0.044 at
    d_model 512) would wreck it, so the recipe uses a fixed conservative peak; garbage counts as no record."""
    for d_model in (32, 512):
        recipe = fine_tune_schedule(training, d_model)
        assert recipe.ended_at is None and not recipe.ended_at_known
        assert recipe.peak == UNRECORDED_PEAK
        assert _planned_peak(recipe, d_model) == pytest.approx(UNRECORDED_PEAK, rel=1e-9)


@pytest.mark.parametrize("last, warmup", [(1, None), (7, 3), (1999, 100), (2000, 4000), (10_000_000, 4000),
                                          (10**12, 1)])
def test_curve_steps_are_bounded_in_number_and_keep_both_ends_and_the_peak(last, warmup):
    x = curve_steps(last, warmup)
    assert len(x) <= CURVE_POINTS + 1 and np.all(np.diff(x) > 0)
    assert x[0] == 1 and x[-1] == last
    if last <= CURVE_POINTS:
        assert np.array_equal(x, np.arange(1, last + 1))          # a short run: every step
    if warmup is not None and warmup <= last:
        assert warmup in x                                          # the peak is drawn where it is
