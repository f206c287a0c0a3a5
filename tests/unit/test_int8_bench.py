"""The int8 kernel benchmark runs and lists the kernel explorer/model/int8.py uses (no timing asserted)."""
from __future__ import annotations

import pytest
import torch

from benchmarks import int8_kernels
from explorer.model import int8


@pytest.mark.skipif(int8.engine() is None, reason="this torch has no int8 engine")
def test_every_candidate_computes_the_product_and_the_benchmark_runs(capsys):
    gen = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(48, 32, generator=gen), torch.randn(48, generator=gen)              # [out, in], [out]
    x = torch.randn(5, 32, generator=gen)                                                            # [5, in]
    exact = x @ weight.t() + bias                                                      # [5, 48]
    calls = int8_kernels.candidates(x, weight, bias)
    assert "float32 oneDNN (today)" in calls and f"int8 dynamic ({int8.engine()})" in calls
    for name, call in calls.items():
        got = call().float()
        assert got.shape == exact.shape
        # int8 rounding (or bfloat16's for the weight-only kernel: 8 bits of mantissa) against float32
        assert float((got - exact).abs().max()) < 0.1 * float(exact.abs().max()), name
    threads = torch.get_num_threads()
    try:
        assert int8_kernels.main(["--rounds", "1", "--calls", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "output projection 512 -> 58101" in out and "int8 dynamic" in out


def test_the_class_benchmark_starts_its_int8_server_with_the_apps_variable(monkeypatch, tmp_path):
    from benchmarks import load_server
    from webapp.models import INT8_ENV

    seen = []
    monkeypatch.setattr(load_server.driver, "streamlit_server", lambda script, env, log, wait: seen.append(env))
    load_server.start_server(tmp_path, "float")
    load_server.start_server(tmp_path, "int8", int8=True)
    assert INT8_ENV not in seen[0] and seen[1][INT8_ENV] == "1"
