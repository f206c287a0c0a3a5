"""The app benchmark's report without a browser: a cold-only run (`--cold-only`) prints the cold-start
rows and no switch rows, and a run against another checkout (`--versus`) prints that checkout's column
and our ratio to it beside the reference's; a --versus folder without an app.py is refused."""
from __future__ import annotations

import argparse

import pytest

from benchmarks import app as bench


def args(**more) -> argparse.Namespace:
    return argparse.Namespace(**{"checkpoint": "bible-es-en", "switches": 5, "cold_only": False, "versus": None,
                                 "json": None, **more})


SHAPE = {"q": 3, "k": 4, "heads": 4, "steps": 5}


def test_cold_only_against_another_checkout(capsys):
    cold = {"ours": [6.0, 5.0, 7.0], "reference": [3.0, 2.0, 4.0], "versus": [8.0, 10.0, 9.0]}
    controls = {"ours": [4.0, 4.0, 4.0], "reference": [2.0, 2.0, 2.0], "versus": [5.0, 5.0, 5.0]}
    cpu = {"ours": [3.0, 3.0, 3.0], "reference": [1.0, 1.0, 1.0], "versus": [4.0, 4.0, 4.0]}
    bench.report(args(cold_only=True, versus="../before"), "una frase", SHAPE, cold, cpu, controls,
                 {"ours": {}, "reference": {}}, (1.0, 1.0, 1.0))
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("cold start -> first translation"))
    assert first.split()[5:7] == ["6.00s", "3.00s"] and "2.00x" in first          # medians, ours / reference
    assert first.split()[-2:] == ["9.00s", "0.67x"]                               # versus, ours / versus
    assert "switch" not in out and "where a switch goes" not in out
    assert "versus 4.00 s" in out and "../before" in out


def test_without_versus_the_switch_rows_are_there(capsys):
    cold = {"ours": [6.0], "reference": [3.0]}
    row = {"visible": 0.2, "settled": 0.3, "to_run": 0.1, "run": 0.1, "app_cpu": 0.05}
    switches = {side: {kind: [row] for kind in ("head", "step", "sentence")} for side in ("ours", "reference")}
    bench.report(args(), "una frase", SHAPE, cold, cold, cold, switches, (1.0, 1.0, 1.0))
    out = capsys.readouterr().out
    assert "switch head (Attention), visible" in out and "versus" not in out


def test_a_versus_folder_without_an_app_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--versus", str(tmp_path), "--cold-only"])
