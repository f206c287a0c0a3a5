"""The OPUS-MT-size benchmark runs (tiny sizes; no timing assertions); CTranslate2 only if installed."""
from __future__ import annotations

import json

import pytest
import torch

from benchmarks import marian as bench_marian

TINY = ["--preset", "tiny", "--vocab", "64", "--src-len", "6", "--out-len", "5", "--beam", "3",
        "--sentences", "2", "--warmup", "0", "--repeats", "1"]


def _run(args: list[str]) -> None:
    threads = torch.get_num_threads()
    try:
        assert bench_marian.main(TINY + args) == 0
    finally:
        torch.set_num_threads(threads)


def test_marian_benchmark_ours_only(tmp_path, capsys):
    _run(["--no-hf", "--no-ct2", "--json", str(tmp_path / "marian.json")])
    assert "ours + BeamTrace" in capsys.readouterr().out
    result = json.loads((tmp_path / "marian.json").read_text())
    assert set(result["median_cpu_s_per_sentence"]) == {"ours + BeamTrace", "ours, no trace"}


def test_marian_benchmark_with_hf_and_ctranslate2(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("ctranslate2")
    _run(["--json", str(tmp_path / "marian.json")])
    out = capsys.readouterr().out
    assert "CTranslate2 int8" in out and "ours+trace / CT2 f32" in out
    ratios = json.loads((tmp_path / "marian.json").read_text())["ratios"]
    assert {"HF / ours+trace (CPU)", "ours+trace / CT2 f32 (CPU)"} <= set(ratios)
