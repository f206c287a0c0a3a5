"""AppTest of the Schedule page's URL when there is no run to show: a link's run= (here a path, as a
hand-edited or hostile link might carry) names nothing the page draws, so it leaves the URL. With runs,
an unknown run falls back to the first (tests/app/test_app_training.py)."""
from __future__ import annotations

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
