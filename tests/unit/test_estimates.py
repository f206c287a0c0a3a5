"""webapp.estimates: a measured rate times the work the library counts, in words (no timing: the rates
here are made up)."""
from __future__ import annotations

import pytest

from explorer.studies.align.scorecard import AlignSettings
from explorer.studies.heads.job import Cost
from webapp.estimates import AlignRates, LabRates, duration, lab_seconds, scorecard_seconds


def cost(n: int) -> Cost:
    return Cost(sentences=n, heads=36, forward_passes=2 + 37 * -(-n // 32), backward_passes=-(-n // 16), decodes=84)


def test_the_head_lab_estimate_is_the_decodes_and_passes_at_the_measured_rates():
    rates = LabRates(sentences=16, decode=0.05, forward=0.01)
    assert lab_seconds(rates, cost(20)) == pytest.approx(84 * 20 * 0.05 + (39 + 3 * 2) * 20 * 0.01)
    assert lab_seconds(rates, cost(200)) > 9 * lab_seconds(rates, cost(20))      # about linear in the sentences


def test_the_scorecard_estimate_counts_pairs_and_integrated_gradients_points():
    rates = AlignRates(pairs=4, attention=0.02, gradient=0.1, ig_point=0.05)
    assert scorecard_seconds(rates, AlignSettings(pairs=200, attribution_pairs=0)) == pytest.approx(4.0)
    with_ig = scorecard_seconds(rates, AlignSettings(pairs=200, attribution_pairs=10, ig_steps=32))
    assert with_ig == pytest.approx(4.0 + 10 * (0.1 + 32 * 0.05))


@pytest.mark.parametrize("seconds, words", [(0.2, "under a second"), (1.2, "1 second"), (40, "40 seconds"),
                                            (100, "2 minutes"), (1870, "31 minutes"), (3 * 3600 + 600, "3 hours 10 minutes"),
                                            (7200, "2 hours")])
def test_durations_are_said_in_rounded_words(seconds, words):
    assert duration(seconds) == words
