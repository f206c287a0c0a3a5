"""The decode benchmark and the bench dispatcher run (tiny sizes; no timing assertions)."""
from __future__ import annotations

import json

import torch

from benchmarks import decode as bench_decode
from benchmarks.__main__ import available, main as dispatch

TINY = ["--preset", "tiny", "--vocab", "64", "--src-len", "6", "--out-len", "5", "--beam", "3",
        "--warmup", "0", "--repeats", "1", "--no-hf"]


def test_decode_benchmark_runs_and_writes_json(tmp_path, capsys):
    threads = torch.get_num_threads()
    try:
        assert bench_decode.main(TINY + ["--json", str(tmp_path / "decode.json")]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "ours, cached + BeamTrace" in out and "uncached / cached" in out
    result = json.loads((tmp_path / "decode.json").read_text())
    assert {"ours, cached", "ours, cached + BeamTrace", "ours, uncached"} <= set(result["median_wall_s"])


def test_dispatcher_finds_and_runs_benchmarks(capsys):
    assert "decode" in available()
    assert dispatch([]) == 2 and dispatch(["no-such-bench"]) == 2
    threads = torch.get_num_threads()
    try:
        assert dispatch(["decode"] + TINY) == 0
    finally:
        torch.set_num_threads(threads)
    assert "ours, uncached" in capsys.readouterr().out
