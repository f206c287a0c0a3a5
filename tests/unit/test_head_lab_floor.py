"""The head lab's floor benchmark (benchmarks/head_lab_floor.py): its count of the defaults' work is the
head lab's own, its piece count is words + EOS, and batching removals together gives the same outputs."""
from __future__ import annotations

import pytest

from benchmarks import head_lab_floor as floor
from explorer.evaluation import comparison
from explorer.store.checkpoint import read_config

needs_small = pytest.mark.skipif(not (floor.SMALL / "model.safetensors").is_file(), reason="needs checkpoints/bible-es-en")


@needs_small
def test_the_floor_counts_the_head_labs_own_work_at_base_size():
    decodes, losses, pieces, minutes = floor.floor_minutes(50.0, 10)
    pairs, _ = comparison.test_pairs(floor.SMALL, read_config(floor.SMALL)[0], 10)
    assert losses == 145                                     # 144 heads of a base model + the full model
    assert decodes == 192                                    # the full model, 144 removals, 47 curve points
    assert pieces == sum(len(p.tgt.split()) + 1 for p in pairs)
    flops = (decodes + losses) * pieces * 2 * 512 * 58101
    assert minutes == pytest.approx(flops / 50e9 / floor.cores() / 60)
    assert floor.floor_minutes(100.0, 10)[3] == pytest.approx(minutes / 2)


@needs_small
def test_removals_batched_together_decode_what_they_decode_apart(capsys):
    floor.small_savings(sentences=6, removals=2)
    out = capsys.readouterr().out
    assert "the same outputs: True" in out and "spent on finished rows" in out
