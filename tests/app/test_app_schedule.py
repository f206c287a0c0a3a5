"""AppTest of the Schedule page's URL when there is no run to show: a link's run= (here a path, as a
hand-edited or hostile link might carry) names nothing the page draws, so it leaves the URL. With runs,
an unknown run falls back to the first (tests/app/test_app_training.py)."""
from __future__ import annotations

import json

import pytest

from explorer.store import run_paths as rp
from explorer.training.schedule import CURVE_POINTS
from support.app_support import array, chart, no_exception, open_app, runs, texts  # noqa: F401
from support.training_fixtures import train_records, write_run

PAGE = "webapp/pages/schedule.py"


def test_a_run_in_the_url_with_no_run_to_show_leaves_it(runs):
    at = open_app(None, PAGE, None, {"run": "../../etc", "warmup": "800"})
    no_exception(at)
    assert "No training run with metrics yet" in texts(at.info)
    assert "run" not in at.query_params
    assert at.query_params["warmup"] == "800"                     # the page's drawn controls keep theirs


def test_a_run_planned_for_ten_million_steps_is_drawn_from_a_bounded_number_of_points(runs):
    """A run's planned learning rate is drawn at curve_steps' points, never one per planned step (a 10M-step
    run made a 173 MB chart and 1.7 GB of memory per page run): on the Schedule page and the Train panel,
    from step 1 to the last planned step, through the warm-up's peak."""
    total = 10_000_000
    write_run(runs / "long", {"state": "finished", "step": 20, "total_steps": total, "pid": None},
              train_records(range(1, 21)))
    for page, key, trace in ((PAGE, "sc_actual", "planned: "), ("webapp/pages/train.py", "tr_curves", "planned LR")):
        at = open_app(None, page, None, {"run": "long"})
        no_exception(at)
        planned = [t for t in chart(at, key)["data"] if t.get("name", "").startswith(trace)]
        steps = array(planned[0]["x"])
        assert len(steps) <= CURVE_POINTS + 1, page
        assert steps[0] == 1 and steps[-1] == total and 10 in steps, page    # the fixture's warm-up: 10 steps


@pytest.mark.parametrize("field, value, message", [
    ("warmup", 0, "warmup must be >= 1, not 0"),             # was a ZeroDivisionError box
    ("warmup", -5, "warmup must be >= 1, not -5"),           # complex numbers
    ("warmup", "abc", "warmup must be int"),                 # TypeError
    ("lr_factor", "x", "lr_factor must be float"),           # ValueError from the format code
])
def test_a_run_whose_train_config_holds_an_unusable_number_is_named_in_one_line(runs, field, value, message):
    run = write_run(runs / "odd", {"state": "finished", "step": 20, "total_steps": 20, "pid": None},
                    train_records(range(1, 21)))
    config = json.loads((run / rp.CONFIG).read_text())
    (run / rp.CONFIG).write_text(json.dumps({**config, field: value}))
    at = open_app(None, PAGE, None, {"run": "odd"})
    no_exception(at)
    warning = texts(at.warning).replace("\\", "")
    assert "train_config.json cannot be read" in warning and message in warning
    names = [t.get("name", "") for t in chart(at, "sc_actual")["data"]]
    assert names and not any(n.startswith("planned: ") for n in names)      # the logged LR alone
