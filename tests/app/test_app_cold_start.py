"""AppTest, in a fresh interpreter (the server process's first script run imports the libraries): that
run is made without Python's cyclic garbage collector walking the growing heap (app.py pauses it), it
is on again when the run is over with what the run left set aside (gc.freeze), and a later run leaves
the collector alone. Counted, not timed: full collections during the run, and gc.disable calls.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from support.app_support import ROOT, TIMEOUT

PROBE = r"""
import gc, json, sys
import streamlit.runtime.scriptrunner.script_runner as runner
from streamlit.testing.v1 import AppTest

seen = {"full collections": 0, "disable calls": 0, "running": False}
def watch(phase, info):
    if phase == "start" and info["generation"] == 2 and seen["running"]:
        seen["full collections"] += 1
gc.callbacks.append(watch)
real_disable = gc.disable
def disable():
    seen["disable calls"] += 1
    real_disable()
gc.disable = disable
real_exec = runner.exec_func_with_error_handling
def run_script(func, ctx):
    seen["running"] = True
    try:
        return real_exec(func, ctx)
    finally:
        seen["running"] = False
runner.exec_func_with_error_handling = run_script

runs = []
for _ in range(2):
    at = AppTest.from_file(sys.argv[1], default_timeout=float(sys.argv[2]))
    at.query_params["ckpt"] = "numbers-en-de"
    at.run()
    runs.append({**{k: v for k, v in seen.items() if k != "running"}, "enabled after": gc.isenabled(),
                 "frozen": gc.get_freeze_count(), "exceptions": [str(e.value) for e in at.exception],
                 "translated": any(m.value.startswith("####") for m in at.markdown)})
    seen.update({"full collections": 0, "disable calls": 0})
print(json.dumps(runs))
"""


def test_the_first_run_imports_without_the_collector_and_later_runs_keep_it():
    env = {k: v for k, v in os.environ.items()
           if k not in ("EXPLORER_CHECKPOINT_ROOTS", "EXPLORER_MODELS_DIR", "EXPLORER_RUNS_DIR")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT / "app.py"), str(TIMEOUT)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=2 * TIMEOUT + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    first, later = json.loads(done.stdout.strip().splitlines()[-1])
    assert not first["exceptions"] and first["translated"], first
    assert first["disable calls"] == 1 and first["full collections"] == 0, first     # paused while it imported
    assert first["enabled after"] and first["frozen"] > 100_000, first               # on again, the run set aside
    assert not later["exceptions"] and later["translated"], later
    assert later["disable calls"] == 0 and later["enabled after"], later              # a later run: untouched
