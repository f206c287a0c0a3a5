"""The GPU check (`python -m benchmarks gpu`) kept alive on a CPU: its --tiny run end to end (the analyses'
stages and the training flags' rows included), its FLOP count against torch's own counter, the chip
table, the budget, a broken stage, the analyses' comparison and a compilation that does not end."""
from __future__ import annotations

import json
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import gpu, gpu_analyses, gpu_compare, gpu_flags, gpu_output, gpu_speed
from explorer.config import preset
from explorer.model import Transformer
from explorer.text.special import BOS_ID
from support.waiting import run_watched


def test_the_tiny_check_runs_every_stage_on_the_cpu_and_writes_its_json(tmp_path):
    done = run_watched([sys.executable, "-m", "benchmarks", "gpu", "--tiny", "--device", "cpu", "--out",
                        str(tmp_path)], "the tiny GPU check on the CPU", [tmp_path])
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == [] and summary["machine"]["device"] == "cpu"
    names = [s.name for s in gpu.stages(tiny=True)]
    for group in ("tests", "correctness", "analyses", "training", "decoding"):
        results = json.loads((tmp_path / f"{group}.json").read_text())
        for name, result in results.items():
            assert name in names and result["ok"] is not False, (name, result)
    correctness = json.loads((tmp_path / "correctness.json").read_text())
    assert all(r["ok"] for r in correctness.values()) and len(correctness) == 4
    training = json.loads((tmp_path / "training.json").read_text())
    assert {r["precision"] for r in training.values()} == {"fp32", "bf16"}
    assert all(r["ratio"] > 0 and r["models"]["ours"]["mfu"] is None for r in training.values())   # no peak on a CPU
    for name, change in gpu_flags.FLAG_ROWS:                          # each flag's row beside the plain one
        assert training[name]["change"] == change
        assert training[name]["fused_adam"] == change.get("fused_adam", False)
    factor = {name: training[name]["padded_tokens_per_side"] / training["train base bf16"]["padded_tokens_per_side"]
              for name in ("train base bf16 2x tokens", "train base bf16 4x tokens")}
    assert factor["train base bf16 2x tokens"] > 1.5 and factor["train base bf16 4x tokens"] > 3
    compiled = training[gpu_flags.COMPILED]                            # through the child process and back
    assert compiled["limit_s"] > 0 and compiled["models"]["ours"]["tokens_per_s"] > 0
    found = json.loads((tmp_path / "analyses.json").read_text())
    assert [r["analysis"] for r in found.values()] == [a.name for a in gpu_analyses.ANALYSES]
    for result in found.values():
        assert result["ok"] is True and result["timed"]["seconds_per_unit"] > 0
        assert result["compared"]["numbers_compared"] > 0 and result["compared"]["others_compared"] > 0
    assert summary["checked"] == [n for n in names if n in correctness or n in found]
    decoding = json.loads((tmp_path / "decoding.json").read_text())
    assert "n-best lists equal HF's" in decoding["beam vs HF"]["agreement"]
    assert len(summary["lines"]) >= len(names) and "correctness passed" in done.stdout


def test_the_model_flop_count_equals_torchs_counter_on_a_batch_without_padding():
    """The training path's forward, attention through the math kernel (the counter does not see the CPU's
    fused one): every product the count names, and nothing else, in the counter's FLOPs (2 per multiply-add)."""
    cfg = preset("tiny", src_vocab_size=97, tgt_vocab_size=97, dropout=0.0)
    model = Transformer(cfg).train()
    src = torch.randint(4, 97, (3, 7))                                              # [B, S], no pad
    tgt = torch.cat([torch.full((3, 1), BOS_ID), torch.randint(4, 97, (3, 5))], 1)  # [B, T+1]
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(src, tgt[:, :-1], targets=tgt[:, 1:])
    assert counter.get_total_flops() == 2 * gpu_speed.forward_macs(cfg, [7, 7, 7], [5, 5, 5])
    assert gpu_speed.training_flops(cfg, [7], [5]) == 6 * gpu_speed.forward_macs(cfg, [7], [5])


def test_the_count_follows_each_sentences_own_length():
    cfg = preset("tiny", src_vocab_size=50, tgt_vocab_size=50)
    both = gpu_speed.training_flops(cfg, [4, 9], [3, 8])
    assert both == gpu_speed.training_flops(cfg, [4], [3]) + gpu_speed.training_flops(cfg, [9], [8])
    assert gpu_speed.training_flops(cfg, [9], [8]) > gpu_speed.training_flops(cfg, [4], [8])


def test_mfu_is_only_given_for_chips_whose_datasheet_peak_is_known(monkeypatch):
    cuda = torch.device("cuda")
    assert gpu_speed.peak_flops(torch.device("cpu"), "bf16") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert gpu_speed.peak_flops(cuda, "bf16") == 989.4e12 and gpu_speed.peak_flops(cuda, "fp32") == 494.7e12
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert gpu_speed.peak_flops(cuda, "bf16") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    assert gpu_speed.peak_flops(cuda, "bf16") is None


def test_stages_that_do_not_fit_the_budget_are_skipped_and_said_and_the_check_fails(tmp_path, capsys):
    run = gpu.Run(torch.device("cpu"), tiny=True, budget=0.0, out=gpu_output.prepare_out(tmp_path / "o"))
    assert gpu.run_all(run) == 1                                       # nothing checked is no pass
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert len(summary["lines"]) == len(gpu.stages(tiny=True))
    assert all("skipped" in line and "budget" in line for line in summary["lines"])
    assert "NOTHING CHECKED" in summary["verdict"]


def test_a_broken_stage_is_recorded_the_next_still_runs_and_the_exit_says_failed(tmp_path, monkeypatch):
    def broken(run):
        raise RuntimeError("CUDA error: an illegal memory access")
    monkeypatch.setattr(gpu, "stages", lambda tiny: [gpu.Stage("correctness", "broken", (0, 0), broken),
                                                     gpu.Stage("training", "fine", (0, 0),
                                                               lambda run: {"ok": True, "line": "fine"})])
    assert gpu.run_all(gpu.Run(torch.device("cpu"), tiny=True, budget=60.0, out=gpu_output.prepare_out(tmp_path))) == 1
    correctness = json.loads((tmp_path / "correctness.json").read_text())
    assert correctness["broken"]["ok"] is False and "illegal memory access" in correctness["broken"]["error"]
    assert json.loads((tmp_path / "training.json").read_text())["fine"]["ok"] is True
    assert json.loads((tmp_path / "summary.json").read_text())["failed"] == ["broken"]


def test_the_comparison_holds_numbers_to_the_tolerance_and_everything_else_to_equality():
    tolerance = gpu_compare.Tolerance(1e-4, 1e-3, "")
    cpu = {"a": [0.0, 2.0, 1000.0], "text": "the cat", "n": 3, "seconds": 5.0, "rows": [{"x": 0.5}]}
    same = gpu_compare.compare_results(cpu, {**cpu, "a": [-0.00009, 2.001, 1000.9], "seconds": 9.0}, tolerance)
    assert same.ok and same.numbers == 4 and abs(same.worst - 0.9) < 1e-9 and same.worst_path == "/a/2"
    for changed in ({"a": [0.0002, 2.0, 1000.0]}, {"a": [0.0, 2.0, 1001.2]}, {"a": [0.0, float("nan"), 1000.0]},
                    {"text": "the dog"}, {"n": 4}, {"rows": []}, {"rows": [{"x": 0.5, "y": 1}]}, {"a": [0.0, None, 1000.0]}):
        found = gpu_compare.compare_results(cpu, {**cpu, **changed}, tolerance)
        assert not found.ok, changed
    assert not gpu_compare.compare_results({}, {}, tolerance).ok                 # nothing compared is no pass


def test_an_analysis_whose_device_result_differs_from_the_cpus_fails_its_stage(tmp_path):
    run = gpu.Run(torch.device("cpu"), tiny=True, budget=60.0, out=tmp_path)
    subject = gpu_analyses.build_subject(run.device, tiny=True)
    with torch.no_grad():                                              # a device that computes wrongly
        for p in subject.device.parameters():
            p.mul_(1.05)
    run.shared["analysis subject"] = subject
    result = gpu_analyses.analysis_stage("lenses")(run)
    assert result["ok"] is False and "FAIL" in result["line"]
    assert result["compared"]["outside_tolerance"] + result["compared"]["unequal"] > 0


def test_a_compilation_that_does_not_end_is_stopped_and_said(tmp_path, monkeypatch):
    def too_long(command, **kwargs):
        assert command[1:3] == ["-m", "benchmarks.gpu_flags"] and kwargs["timeout"] >= 10
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])
    monkeypatch.setattr(gpu_flags.subprocess, "run", too_long)
    result = gpu_flags.compiled_row("tiny")(gpu.Run(torch.device("cpu"), tiny=True, budget=60.0, out=tmp_path))
    assert result["ok"] is False and "did not finish" in result["line"]
