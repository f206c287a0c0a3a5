"""What must hold on a CUDA GPU: marked `cuda`, skipped without one (CI has none); the GPU check
(`python -m benchmarks gpu`) runs them first on every machine that has one."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import beam_search, greedy_search
from explorer.inspection.hooks import capture
from explorer.store.checkpoint import load_checkpoint
from support.model_helpers import BOS, EOS, PAD, make_model
from support.numerics import model_atol, score_atol

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SRC = [[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS]]


def test_the_model_moves_to_the_gpu_and_decodes_what_the_cpu_decodes():
    cpu = make_model()
    gpu = copy.deepcopy(cpu).cuda()
    cfg = DecodeConfig(beam_size=4, n_best=4, max_len_b=12)
    a, b = beam_search(cpu, SRC, cfg), beam_search(gpu, SRC, cfg)
    assert [d.best.ids for d in a] == [d.best.ids for d in b]
    # another device's kernels: the suite's bound for a score computed two ways (a fixed 1e-4 was 100-200x
    # tighter than it, for kernels that sum in other orders)
    assert all(abs(x.best.score - y.best.score) <= score_atol(cpu, x.best.token_logprobs) for x, y in zip(a, b))
    assert [d.best.ids for d in greedy_search(cpu, SRC)] == [d.best.ids for d in greedy_search(gpu, SRC)]


def test_a_capture_on_the_gpu_returns_host_arrays_equal_to_the_cpu_ones():
    cpu = make_model()
    gpu = copy.deepcopy(cpu).cuda()
    src = torch.tensor([[5, 6, 7, EOS]])
    tgt = torch.tensor([[BOS, 8, 9]])
    with capture(cpu, "*attn*") as on_cpu:
        cpu(src, tgt)
    with capture(gpu, "*attn*") as on_gpu:
        gpu(src.cuda(), tgt.cuda())
    assert on_cpu.arrays.keys() == on_gpu.arrays.keys() and on_cpu.arrays
    for name, array in on_cpu.arrays.items():      # masked scores are -inf on both: allclose wants them in the same places
        atol = model_atol(cpu, array, vocab=False)   # another device's kernels: other orders of the same sums
        np.testing.assert_allclose(on_gpu.arrays[name], array, rtol=0, atol=atol, err_msg=name)


def test_a_training_step_on_the_gpu_lowers_the_loss_in_float32_and_bf16():
    for bf16 in (False, True):
        model = make_model().cuda().train()
        src = torch.tensor(SRC[0] * 2).view(2, -1).cuda()                         # [2, 6]
        tgt = torch.tensor([[BOS, 13, 14, 15, 16, EOS, PAD]] * 2).cuda()          # [2, 7]
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(20):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                loss = model(src, tgt[:, :-1], targets=tgt[:, 1:])
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        assert losses[-1] < losses[0] / 2, (bf16, losses)


def test_a_shipped_checkpoint_loads_onto_the_gpu():
    loaded = load_checkpoint("checkpoints/numbers-en-de", device="cuda")
    assert next(loaded.model.parameters()).device.type == "cuda"
    out = greedy_search(loaded.model, [[5, 6, 7, loaded.config.eos_id]])
    assert out[0].best.ids
