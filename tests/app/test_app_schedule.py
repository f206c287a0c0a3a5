"""AppTest of the Schedule page's URL when there is no run to show: a link's run= (here a path, as a
hand-edited or hostile link might carry) names nothing the page draws, so it leaves the URL. With runs,
an unknown run falls back to the first (tests/app/test_app_training.py)."""
from __future__ import annotations

from support.app_support import no_exception, open_app, runs, texts  # noqa: F401

PAGE = "webapp/pages/schedule.py"


def test_a_run_in_the_url_with_no_run_to_show_leaves_it(runs):
    at = open_app(None, PAGE, None, {"run": "../../etc", "warmup": "800"})
    no_exception(at)
    assert "No training run with metrics yet" in texts(at.info)
    assert "run" not in at.query_params
    assert at.query_params["warmup"] == "800"                     # the page's drawn controls keep theirs
