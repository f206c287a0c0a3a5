"""The OPUS-MT-size benchmark runs (tiny sizes; no timing assertions); CTranslate2 only if installed."""
from __future__ import annotations

import json

import pytest
import torch

from benchmarks import marian as bench_marian
from explorer.model import int8

TINY = ["--preset", "tiny", "--vocab", "64", "--src-len", "6", "--out-len", "5", "--beam", "3",
        "--sentences", "2", "--warmup", "0", "--repeats", "1", "--no-bible"]


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
    int8_rows = {"ours int8 + BeamTrace", "ours int8 + BeamTrace (2 threads)"} if int8.engine() else set()
    assert set(result["median_cpu_s_per_sentence"]) == {"ours + BeamTrace", "ours, no trace"} | int8_rows
    _run(["--no-hf", "--no-ct2", "--no-int8", "--json", str(tmp_path / "float.json")])
    result = json.loads((tmp_path / "float.json").read_text())
    assert set(result["median_cpu_s_per_sentence"]) == {"ours + BeamTrace", "ours, no trace"}


def test_marian_benchmark_with_hf_and_ctranslate2(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("ctranslate2")
    _run(["--json", str(tmp_path / "marian.json")])
    out = capsys.readouterr().out
    assert "CTranslate2 int8" in out and "ours+trace / CT2 f32" in out
    ratios = json.loads((tmp_path / "marian.json").read_text())["ratios"]
    assert {"HF / ours+trace (CPU)", "ours+trace / CT2 f32 (CPU)"} <= set(ratios)
    if int8.engine():
        assert {"ours int8 / CT2 int8, 1 thread (CPU)", "ours int8 / CT2 int8, 2 threads (wall)"} <= set(ratios)
        assert "equal CTranslate2 int8's" in out and "ours int8: " in out


def test_the_int8_test_set_comparison(capsys):
    """The test-set rows on a few verses of the small shipped model: BLEU of each, int8 against float."""
    from benchmarks import int8_quality
    from explorer.model import int8

    if int8.engine() is None or not (int8_quality.BIBLE.parent / "numbers-en-de" / "model.safetensors").is_file():
        pytest.skip("needs an int8 engine and the shipped checkpoint numbers-en-de")
    result = int8_quality.held_out_agreement(int8_quality.BIBLE.parent / "numbers-en-de", limit=6, beam=2)
    assert result["n"] == 6 and {"float32", "int8", "int8_vs_float32", "bleu_drop"} <= set(result)
    assert 0 <= result["int8_vs_float32"]["identical"] <= 6
    assert "int8 against float32's outputs" in int8_quality.report(result)


def test_agreement_counts_identical_outputs():
    from benchmarks.int8_quality import agreement

    result = agreement([[5, 6, 7], [1, 2]], [[5, 6, 7], [1, 3]])
    assert result["identical"] == 1 and result["n"] == 2 and result["identical_share"] == 0.5
    assert agreement(["a b c d"], ["a b c d"])["bleu"] == 100.0
