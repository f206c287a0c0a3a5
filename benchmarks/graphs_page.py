"""The Graphs page as a user meets it, in-process (Streamlit's AppTest, as tests/app opens pages): from
opening the page on a sentence and an output word to the graph drawn (the page's estimate, the background
job and the drawing), the page's link opened in a fresh session (the graph read from its kept file), and a
rerun at another node threshold (a kept pruning, no job).

    python -m benchmarks graphs_page [--checkpoint numbers-en-de] [--text "one hundred and ninety four"] [--word 3]

The dictionaries are those in $EXPLORER_RUNS_DIR/features (or runs/features): `python -m explorer features
train` or the app's one-site jobs; with any missing the page offers a training job instead, and this
benchmark says so and stops. The graph's file is kept under $EXPLORER_RUNS_DIR/graphs: the first open is
cold only when no graph of that question is kept there (the output says which it was).
"""
from __future__ import annotations

import argparse
import os
import time

from explorer.files.places import REPO_ROOT
from explorer.studies.graphs.job import NODE_THRESHOLDS

PAGE = "webapp/pages/graphs.py"
ROUNDS = 6                 # page runs to wait through: a missing graph's job, then the run that draws it


def said(at) -> list[str]:
    """What the page tells the user in boxes (the estimate, a refusal, a missing dictionary)."""
    return [str(e.value) for kind in ("info", "warning", "error") for e in at.get(kind)]


def figure(at):
    """The graph's plotly chart, or None while the page has drawn none."""
    return next((c for c in at.get("plotly_chart") if c.proto.id.endswith("-graphs_figure")), None)


def until_drawn(at, timeout: float) -> tuple[object, bool]:
    """Run the page until its graph is drawn, each background job it started waited for; (the AppTest,
    whether a graph job ran). RuntimeError with what the page said when it draws none."""
    ran = False
    for _ in range(ROUNDS):
        if at.exception:
            raise RuntimeError(f"the page failed: {at.exception[0].value}")
        jobs = [j for j in _jobs() if j.active]
        if not jobs and figure(at) is not None:
            return at, ran
        for job in jobs:
            ran = ran or job.label == "Graph"
            if not job.wait(timeout):
                raise RuntimeError(f"the {job.label} job did not end in {timeout:.0f} s")
            if job.state != "finished":
                raise RuntimeError(f"the {job.label} job ended {job.state}: {job.error}")
        at.run()
    raise RuntimeError("no graph drawn: " + " | ".join(said(at))[:600])


def opened(query: dict, text: str, timeout: float):
    """A fresh session (a new AppTest) on the Graphs page with the URL's query and the shared sentence."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=timeout)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.session_state["text"] = text
    at.switch_page(PAGE)
    return at.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks graphs_page")
    parser.add_argument("--checkpoint", default="numbers-en-de", help="a checkpoint's name, as the app lists it")
    parser.add_argument("--text", default="one hundred and ninety four")
    parser.add_argument("--word", type=int, default=3, help="the output word explained (1-based, as in the URL)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="the longest wait for one page run or job")
    args = parser.parse_args(argv)
    query = {"ckpt": args.checkpoint, "word": args.word}

    start = time.perf_counter()
    at = opened(query, args.text, args.timeout)
    estimate = [s for s in said(at) if "Drawing the graph in the background" in s]
    if figure(at) is None and not estimate and not any(j.active for j in _jobs()):
        print(f"{args.checkpoint}: the page draws no graph and starts none: " + " | ".join(said(at))[:600])
        return 1
    at, ran = until_drawn(at, args.timeout)
    cold = time.perf_counter() - start
    link = dict(at.query_params)

    start = time.perf_counter()
    fresh, again = until_drawn(opened({k: v[0] if isinstance(v, list) else v for k, v in link.items()},
                                      args.text, args.timeout), args.timeout)
    from_link = time.perf_counter() - start

    other = NODE_THRESHOLDS[0] if fresh.select_slider(key="graphs_nodes").value != NODE_THRESHOLDS[0] \
        else NODE_THRESHOLDS[-1]
    start = time.perf_counter()
    fresh.select_slider(key="graphs_nodes").set_value(other).run()
    rerun = time.perf_counter() - start
    if fresh.exception or figure(fresh) is None:
        raise RuntimeError("the rerun at another threshold drew no graph")

    picker = fresh.selectbox(key="graphs_word")
    print(f"{args.checkpoint}, {args.text!r}, word {args.word} ({picker.options[picker.index]}): "
          f"{'cold (the graph job ran)' if ran else 'the graph was kept already (no job ran)'}")
    if estimate:
        print("  the page said: " + estimate[0][:300])
    print(f"  page, first open to the graph drawn: {cold:.1f} s")
    print(f"  page, from its link in a fresh session: {from_link:.1f} s{' (a job ran again!)' if again else ''}")
    print(f"  a rerun at the node threshold {other:.0%}: {rerun:.2f} s")
    print(f"  (load {os.getloadavg()[0]:.1f})")
    return 0


def _jobs() -> list:
    """The app's background jobs (imported late: the app's modules load Streamlit)."""
    from webapp import background

    return list(background._JOBS.values())
