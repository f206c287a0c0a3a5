"""Training from the app, in a real browser: start a numbers job on the Train page, watch its
progress bar and loss curve move while visiting another page and coming back, stop it, and find
the checkpoint it saved in the sidebar picker.

The server's runs directory is a temporary folder (EXPLORER_RUNS_DIR, see conftest), so nothing
lands in runs/. The job asks for 2,000 steps (evaluation and a checkpoint every 100) so that it is
still running when the test stops it, however fast the machine; Stop makes the trainer save.

More checkpoints than the picker's dropdown draws at once (copies of a shipped one) are listed before
the run's own, so the test sees a long list whatever else is on disk, and finds the new checkpoint
as a user does in a long list: by typing its name into the picker.
"""
from __future__ import annotations

import json
import re
import shutil

import pytest

from browser_support import (ARTIFACTS, LONG, NUMBERS, ROOT, idle, no_exception, open_app, pick_checkpoint,
                             sidebar_to, timed, url_param, wait_plotly)
from explorer.training import jobs, launch
from support.train_helpers import wait_for_run

RUN = "browser-numbers"
STEPS = 2000
FILLERS = 30
PROGRESS = "() => document.querySelector(\"[data-testid='stProgress']\")?.innerText || ''"
# points of the train-loss line drawn so far (plotly keeps the figure's data on its graph div)
LOSS_POINTS = """() => {
  const gd = document.querySelector('.st-key-tr_curves .js-plotly-plot');
  const trace = gd && gd._fullData && gd._fullData.find(t => t.name === 'train loss');
  return trace ? trace._length || 0 : 0;
}"""


def progress_step(page) -> int:
    match = re.search(r"step (\d+) of", page.evaluate(PROGRESS))
    return int(match.group(1)) if match else -1


def wait_progress_beyond(page, step: int, points: int) -> tuple[int, int]:
    """Until the progress bar shows a step past `step` and the loss curve has more than `points`."""
    with timed(f"progress past step {step}, loss curve past {points} points"):
        page.wait_for_function(
            f"""() => {{ const m = ({PROGRESS})().match(/step (\\d+) of/);
                        return m && +m[1] > {step} && ({LOSS_POINTS})() > {points}; }}""", timeout=LONG)
    return progress_step(page), page.evaluate(LOSS_POINTS)


@pytest.fixture
def crowded(more_checkpoints):
    """FILLERS checkpoints listed between the shipped ones and the run's: more than the sidebar's
    dropdown draws at once (about a dozen). Removed after the test."""
    source = ROOT / "checkpoints" / NUMBERS
    if not (source / "config.json").is_file():
        pytest.skip(f"needs the shipped checkpoint {NUMBERS} to copy")
    made = []
    for i in range(FILLERS):
        made.append(more_checkpoints / f"filler-{i:02d}")
        shutil.copytree(source, made[-1], ignore=shutil.ignore_patterns("test.tsv"))
        meta = json.loads((made[-1] / "config.json").read_text())
        (made[-1] / "config.json").write_text(json.dumps({**meta, "name": made[-1].name}))
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def snapshot(page, name: str) -> None:
    """A screenshot with the job panel in view (the main area scrolls inside its own container)."""
    page.locator("[data-testid='stProgress']").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / name))


def test_train_watch_stop_and_pick_the_checkpoint(visit, runs_dir, crowded):
    page = open_app(visit, "train", ckpt=NUMBERS)
    wait_plotly(page, "tr_planned")                                 # the planned LR curve, before launch
    assert page.get_by_role("radio", name=re.compile("^Number words")).is_checked()   # numbers is the default
    page.get_by_label("Run name (folder under runs/)", exact=True).fill(RUN)
    page.get_by_label("Steps", exact=True).fill(str(STEPS))
    page.get_by_label("Evaluate every (steps)", exact=True).fill("100")
    page.get_by_label("Checkpoint every (steps)", exact=True).fill("100")
    page.get_by_label("Checkpoint every (steps)", exact=True).press("Tab")
    planned = "n => document.querySelector('.st-key-tr_planned .js-plotly-plot')?._fullData?.[0]?._length === n"
    page.wait_for_function(planned, arg=STEPS, timeout=LONG)         # the form took the settings
    page.get_by_role("button", name="Start training").click()
    page.wait_for_selector(f"text=Started {RUN}", timeout=LONG)
    run_dir = runs_dir / RUN
    try:
        # progress and loss curve move while the page is open ...
        wait_plotly(page, "tr_curves")
        first = wait_progress_beyond(page, 0, 0)
        snapshot(page, "train_running.png")
        # ... the job keeps going on another page (a page switch must not stop it) ...
        sidebar_to(page, "Schedule")
        no_exception(page)
        with timed("trainer advances while the Schedule page is shown"):
            job = wait_for_run(run_dir, lambda j: j.step > first[0] or not j.active, "the trainer to advance")
        assert job.active, f"the job stopped while another page was shown: {job.state} {job.last_error}"
        # ... and back on the Train page the progress bar and the curve have moved on
        sidebar_to(page, "Train")
        wait_plotly(page, "tr_curves")
        second = wait_progress_beyond(page, first[0], first[1])
        assert second[0] > first[0] and second[1] > first[1]
        assert jobs.poll(run_dir).active
        # Stop: the trainer saves a checkpoint and exits
        with timed("Stop -> stopped"):
            page.get_by_role("button", name="Stop").click()
            page.wait_for_function(
                "() => [...document.querySelectorAll('h3')].some(h => /: stopped/.test(h.innerText))", timeout=LONG)
            idle(page)
        job = wait_for_run(run_dir, lambda j: not j.active, "the stopped trainer to exit")
        assert job.state == "stopped" and job.checkpoints, f"no checkpoint after Stop: {job.state} {job.note}"
        snapshot(page, "train_stopped.png")
        # the checkpoint saved on Stop is offered in the sidebar picker, without restarting the app,
        # and picking it puts it in use (found by typing its name: the list also holds what else is
        # on disk, and the dropdown draws only its first options)
        saved = job.checkpoints[-1]
        step = int(saved.name.split("_")[-1])
        name = f"{RUN}@{step}"
        labels = pick_checkpoint(page, name, screenshot="train_sidebar_picker.png")
        assert any(label.startswith(name + " (") for label in labels), labels
        assert url_param(page, "ckpt") == name
        sidebar = page.locator("[data-testid='stSidebar']")
        shown = sidebar.locator("[data-testid='stSelectbox'] input").first.input_value()
        assert shown.startswith(name + " ("), shown                 # the picker shows it ...
        page.wait_for_function("s => document.querySelector(\"[data-testid='stSidebar']\").innerText.includes(s)",
                               arg=f"step {step} ·", timeout=LONG)       # ... and its caption
        assert "Damaged checkpoint" not in sidebar.inner_text()
        no_exception(page)
        visit.assert_offline_and_quiet()
    finally:
        if jobs.poll(run_dir).active:                               # never leave a trainer behind
            launch.stop(run_dir)
            jobs.wait(run_dir, timeout=60)
