"""The faithfulness scorecard's fast gradient path (every target's backward pass batched over one forward
per path point) gives the attributions of the reference path (captum, one row per target and path
point: explorer.align.attribution.piece_attributions), post-LN and pre-LN, however the targets and
path points are cut into batches."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.align.attribution import piece_attributions, row_bytes
from explorer.align.pairs import ModelPair
from explorer.contributions.gradients import all_targets, path_points
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)

SRC, OUT = [5, 9, 12, 7, 30, 3], [11, 4, 17, 8, 21, 3]


@pytest.fixture(scope="module", params=[False, True], ids=["post-LN", "pre-LN"])
def model(request):
    return make_model(norm_first=request.param)


@pytest.mark.parametrize("method", ["grad-x-input", "integrated-gradients"])
def test_fast_path_equals_captum_one_row_at_a_time(model, method):
    pair = ModelPair(gold=None, src_ids=SRC, out_ids=OUT, src_groups=[], tgt_groups=[])
    reference = piece_attributions(model, pair, method, steps=4)                         # [T, S]
    one_row = row_bytes(model.cfg, len(SRC), len(OUT))
    for budget in (1 << 30, 2 * one_row):       # all at once; 2 rows a batch: 1 target, 2 of its 4 points
        fast = all_targets(model, SRC, OUT, method, steps=4, budget=budget)
        assert fast.shape == (len(OUT), len(SRC))
        assert np.abs(fast - reference).max() < 1e-5, budget
    assert np.abs(reference).max() > 1e-3                                                # not trivially zero


def test_path_points_are_captums_and_integrate_to_one():
    alphas, weights = path_points("integrated-gradients", 8)
    assert len(alphas) == len(weights) == 8 and all(0 < a < 1 for a in alphas)
    assert abs(sum(weights) - 1) < 1e-9
    assert path_points("grad-x-input", 8) == ([1.0], [1.0])
    with pytest.raises(ValueError, match="attribution method"):
        all_targets(make_model(), SRC, OUT, "lime")


def test_integrated_gradients_are_complete():
    """Their sum over the source is F(e) - F(0) for each target (a smooth activation, so that the
    Gauss-Legendre rule converges)."""
    model = make_model(activation="gelu").double()
    attr = all_targets(model, SRC, OUT, "integrated-gradients", steps=32)                   # [T, S]
    from explorer.contributions.gradients import _forced_logprobs
    from explorer.decoding.core import special_ids
    src = torch.tensor([SRC])
    out = torch.tensor([OUT])
    tgt_in = torch.cat([torch.tensor([[special_ids(model).start]]), out[:, :-1]], dim=1)
    e = model.encoder.embed.lookup(src) * model.encoder.embed.scale                           # [1, S, d]
    with torch.no_grad():
        ends = _forced_logprobs(model, src, tgt_in, out, torch.cat([e, torch.zeros_like(e)]))  # [2, T]
    assert np.allclose(attr.sum(axis=1), (ends[0] - ends[1]).numpy(), atol=1e-4)
