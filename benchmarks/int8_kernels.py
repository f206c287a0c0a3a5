"""Which int8 kernel for decoding: one product of a beam step's shape on each candidate torch offers.

Why a benchmark: explorer/model/int8.py chose torch's dynamically quantized linear (fbgemm) because it was
fastest here on the products a beam-5 step at OPUS-MT size makes; this measures that choice again on any
machine. The shapes: 5 rows (a beam of 5) times the output projection 512 -> 58,101, the fused q|k|v
512 -> 1,536, the FFN's 512 -> 2,048 and 2,048 -> 512. The candidates, every one a maintained kernel:
  float32 oneDNN   the plain decoder's product today (a weight packed once for oneDNN)
  float32 MKL      F.linear
  int8 dynamic     torch.ops.quantized.linear_dynamic on each engine torch has (fbgemm, onednn, x86):
                   int8 weights per row, the input quantized inside the kernel
  oneDNN qlinear   torch.ops.onednn.qlinear_pointwise (the x86 path of torch's PT2E quantization): the
                   input quantized by separate torch calls first
  _int_mm          torch._int_mm on int8 rows and an int8 weight, scaled back by separate calls
  weight-only      torch.ops.aten._weight_int8pack_mm: int8 weights, bfloat16 input
CPU ms per call, the median of --rounds interleaved rounds (each candidate --calls calls), and each one's
speed against float32 oneDNN. A candidate this torch lacks is listed as unavailable.
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Callable

import torch
import torch.nn.functional as F

from explorer.model.int8 import _pack, weight_scales
from explorer.model.plain_decoder import _product

SHAPES = {"output projection": (512, 58101), "q|k|v": (512, 1536), "FFN in": (512, 2048), "FFN out": (2048, 512)}


def candidates(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> dict[str, Callable[[], object]]:
    """name -> a call computing x W^T + b, [rows, in] -> [rows, out]; those this torch cannot run are left out."""
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0])
    with torch.no_grad():
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    out = {"float32 oneDNN (today)": (lambda p=_product(linear): p(x)),
           "float32 MKL (F.linear)": lambda: F.linear(x, weight, bias)}
    for engine in ("fbgemm", "onednn", "x86"):
        if engine in torch.backends.quantized.supported_engines:
            packed = _pack(weight, bias, engine)
            out[f"int8 dynamic ({engine})"] = (lambda p=packed: torch.ops.quantized.linear_dynamic(x, p, False))
    scales = weight_scales(weight)                                                    # [out]
    q = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)         # [out, in]
    try:
        packed = torch.ops.onednn.qlinear_prepack(q, list(x.shape))
        zeros = torch.zeros_like(scales, dtype=torch.long)

        def qlinear():
            low, high = x.min().clamp(max=0), x.max().clamp(min=0)
            scale = float((high - low) / 255)
            zero = int(round(-float(low) / scale))
            xq = torch.clamp(torch.round(x / scale) + zero, 0, 255).to(torch.uint8)   # [rows, in]
            return torch.ops.onednn.qlinear_pointwise(xq, scale, zero, packed, scales, zeros, bias, 1.0, 0,
                                                      torch.float32, "none", [], "")
        qlinear()
        out["oneDNN qlinear_pointwise"] = qlinear
    except (AttributeError, RuntimeError, NotImplementedError):
        pass
    q_t = q.t().contiguous()                                                          # [in, out]

    def int_mm():
        row = x.abs().amax(1, keepdim=True).clamp_min(1e-12) / 127                   # [rows, 1]
        return torch._int_mm(torch.round(x / row).to(torch.int8), q_t) * row * scales + bias   # [rows, out]
    try:
        int_mm()
        out["torch._int_mm"] = int_mm
    except (AttributeError, RuntimeError):
        pass
    x16, s16, b16 = x.bfloat16(), scales.bfloat16(), bias.bfloat16()
    try:
        torch.ops.aten._weight_int8pack_mm(x16, q, s16)
        out["weight-only _weight_int8pack_mm (bf16)"] = lambda: torch.ops.aten._weight_int8pack_mm(x16, q, s16) + b16
    except (AttributeError, RuntimeError):
        pass
    return out


def measure(calls: dict[str, Callable[[], object]], rounds: int, per_round: int) -> dict[str, float]:
    """Median CPU ms per call over interleaved rounds (each: every candidate `per_round` times)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.process_time()
            for _ in range(per_round):
                call()
            times[name].append((time.process_time() - start) / per_round * 1e3)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks int8-kernels", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5, help="rows of the input (a beam of 5: 5)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="calls per candidate per round")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    print(f"{args.rows} rows, {args.threads} thread(s), torch {torch.__version__}, engines "
          f"{torch.backends.quantized.supported_engines}; CPU ms per call, median of {args.rounds} interleaved rounds")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # quantized tensors' deprecation, once per candidate
        for label, (n_in, n_out) in SHAPES.items():
            weight = torch.randn(n_out, n_in, generator=gen) * n_in ** -0.5           # [out, in]
            bias = torch.randn(n_out, generator=gen) * 0.01                            # [out]
            x = torch.randn(args.rows, n_in, generator=gen)                            # [rows, in]
            ms = measure(candidates(x, weight, bias), args.rounds, args.calls)
            base = ms["float32 oneDNN (today)"]
            print(f"{label} {n_in} -> {n_out}:")
            for name, value in ms.items():
                print(f"  {name:40s} {value:8.3f} ms  {base / value:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
