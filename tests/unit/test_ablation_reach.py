"""Which attention weights a head ablation can change (explorer.inspection.trace.weights_depend_on),
checked against the model itself: switching off one head at a time in a tiny model, every block the
rule calls untouched has exactly the same weights, and every block it calls dependent moves."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.decoding.translate import capture_forward
from explorer.inspection.trace import KINDS, attention_kind, untouched_by
from support.model_helpers import make_model


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_rule_matches_the_model_block_by_block(norm_first):
    model = make_model(n_encoder_layers=2, n_decoder_layers=2, norm_first=norm_first)
    torch.manual_seed(1)
    src, out = torch.randint(4, 40, (7,)).tolist(), torch.randint(4, 40, (6,)).tolist()
    blocks = [(k, l) for k in KINDS for l in range(attention_kind(k).n_layers(model.cfg))]
    names = [attention_kind(k).capture_name(l) for k, l in blocks]
    plain, _ = capture_forward(model, src, out, names, ())
    for kind, layer in blocks:
        ablated = [(kind, layer, 0)]
        cut, _ = capture_forward(model, src, out, names, ablated)
        for (k, l), name in zip(blocks, names):
            moved = float(np.abs(cut.arrays[name] - plain.arrays[name]).max())
            if untouched_by(k, l, ablated):
                assert moved == 0.0, (ablated, k, l, moved)
            else:
                assert moved > 1e-6, (ablated, k, l, moved)
