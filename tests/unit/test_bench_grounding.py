"""`python -m benchmarks grounding --state-map`: the encoder-state map built and calibrated as the shipped one
is (build.calibrated_map), timed, nothing saved: the command behind GROUNDING's build time. Here on the
numbers model with a few hundred training sentences (the real run reads all of them)."""
from __future__ import annotations

import re

from benchmarks import grounding as bench
from explorer.studies.grounding import build
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"


def test_the_state_map_is_built_timed_and_not_saved(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    few = build.training_pairs

    def first_pairs(meta):
        return few(meta)[:300]
    monkeypatch.setattr(build, "training_pairs", first_pairs)
    shipped = sorted(p.name for p in (ROOT / "checkpoints" / "grounding").iterdir())
    assert bench.main(["--checkpoint", str(NUMBERS), "--state-map"]) == 0
    said = capsys.readouterr().out
    found = re.search(r"encoder-state map of numbers-en-de: ([0-9,]+) training piece states, built and calibrated in "
                      r"\d+ s .*threshold ([0-9.e+-]+) \(none kept\)", said)
    assert found, said
    assert int(found.group(1).replace(",", "")) > 300 and float(found.group(2)) > 0
    assert not (tmp_path / "runs" / "grounding").exists() or not any((tmp_path / "runs" / "grounding").iterdir())
    assert sorted(p.name for p in (ROOT / "checkpoints" / "grounding").iterdir()) == shipped      # nothing saved
