"""The Train page's planned learning-rate curve of a run whose train_config.json holds a number the trainer
refuses: no curve, never an exception box (a warmup of 10**400 passed the config's type check and
overflowed a float in the schedule)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from explorer.config import TrainConfig
from explorer.store.metrics import Curves
from explorer.training.jobs import Job
from webapp.views.train import _planned


def _job(**config) -> Job:
    return Job("r", Path("r"), "finished", total_steps=100, config={**TrainConfig().to_dict(), **config})


def test_a_sound_run_has_its_planned_curve():
    x, lr = _planned(_job(), Curves(step=np.array([10.0, 20.0])))
    assert len(x) == len(lr) > 2 and np.isfinite(lr).all() and lr.max() > 0


@pytest.mark.parametrize("config", [{"warmup": 10 ** 400}, {"warmup": 10 ** 9}, {"max_steps": 10 ** 400}])
def test_a_number_past_the_trainers_limits_draws_no_curve(config):
    assert _planned(_job(**config), Curves(step=np.array([10.0, 20.0]))) is None
