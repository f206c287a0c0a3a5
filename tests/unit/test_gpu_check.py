"""The GPU check (`python -m benchmarks gpu`) kept alive on a CPU: its --tiny run end to end, its FLOP
count against torch's own counter, the chip table, the budget and a broken stage."""
from __future__ import annotations

import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import gpu, gpu_speed
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
    for group in ("tests", "correctness", "training", "decoding"):
        results = json.loads((tmp_path / f"{group}.json").read_text())
        for name, result in results.items():
            assert name in names and result["ok"] is not False, (name, result)
    correctness = json.loads((tmp_path / "correctness.json").read_text())
    assert all(r["ok"] for r in correctness.values()) and len(correctness) == 4
    training = json.loads((tmp_path / "training.json").read_text())
    assert {r["precision"] for r in training.values()} == {"fp32", "bf16"}
    assert all(r["ratio"] > 0 and r["models"]["ours"]["mfu"] is None for r in training.values())   # no peak on a CPU
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


def test_stages_that_do_not_fit_the_budget_are_skipped_and_said(tmp_path, capsys):
    run = gpu.Run(torch.device("cpu"), tiny=True, budget=0.0, out=tmp_path)
    assert gpu.run_all(run) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["lines"]) == len(gpu.stages(tiny=True))
    assert all("skipped" in line and "budget" in line for line in summary["lines"])


def test_a_broken_stage_is_recorded_the_next_still_runs_and_the_exit_says_failed(tmp_path, monkeypatch):
    def broken(run):
        raise RuntimeError("CUDA error: an illegal memory access")
    monkeypatch.setattr(gpu, "stages", lambda tiny: [gpu.Stage("correctness", "broken", (0, 0), broken),
                                                     gpu.Stage("training", "fine", (0, 0),
                                                               lambda run: {"ok": True, "line": "fine"})])
    assert gpu.run_all(gpu.Run(torch.device("cpu"), tiny=True, budget=60.0, out=tmp_path)) == 1
    correctness = json.loads((tmp_path / "correctness.json").read_text())
    assert correctness["broken"]["ok"] is False and "illegal memory access" in correctness["broken"]["error"]
    assert json.loads((tmp_path / "training.json").read_text())["fine"]["ok"] is True
    assert json.loads((tmp_path / "summary.json").read_text())["failed"] == ["broken"]
