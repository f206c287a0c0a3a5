"""The Noam learning-rate schedule and the label-smoothing target: pure functions, known values."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.training.schedule import label_smoothing_target, noam_curve, noam_rate


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
