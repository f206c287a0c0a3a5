"""Integrated gradients' path, point by point: why a contrast's completeness error does not fall with
more points on some steps (docs/SEARCH.md, "Completeness depends on the step").

Along the straight path from the zero baseline to the input (inputs = alpha x token vectors, positions
kept, as explorer.studies.contrastive.attribution integrates it), prints F(0), F(1), the steepest place of
dF/dalpha, and the trapezoid rule's completeness error at growing numbers of evenly spaced points.

    .venv/bin/python scripts/ig_path.py [--step 1] [--points 4001]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from explorer.config import DecodeConfig
from explorer.studies.contrastive.attribution import _function
from explorer.studies.contrastive.foils import step_of
from explorer.decoding.translate import translate
from explorer.store.checkpoint import load_checkpoint

SENTENCE = "En el principio creó Dios los cielos y la tierra."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="checkpoints/bible-es-en")
    parser.add_argument("--step", type=int, default=1, help="the best path's step, from 1")
    parser.add_argument("--points", type=int, default=4001, choices=range(3, 20001), metavar="[3-20000]")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ckpt = load_checkpoint(args.checkpoint)
    model = ckpt.model.eval()
    out = translate(model, ckpt.tokenizer, SENTENCE, DecodeConfig(beam_size=5), trace=True)
    step = step_of(out.beam_trace, out.beam_trace.best_path()[args.step - 1])
    forward, src, tgt = _function(model, out.src_ids, step.prefix, step.chosen, step.alternatives[0][0])
    alphas = torch.linspace(0, 1, args.points)                                  # [N]
    values, slopes = [], []
    for chunk in alphas.split(200):
        s = (chunk[:, None, None] * src).requires_grad_()                       # [n, S, d]
        t = (chunk[:, None, None] * tgt).requires_grad_()                       # [n, T, d]
        f = forward(s, t, torch.ones(len(chunk)))                               # [n]
        g_src, g_tgt = torch.autograd.grad(f.sum(), (s, t))
        values.append(f.detach())
        slopes.append(((g_src * src).sum((1, 2)) + (g_tgt * tgt).sum((1, 2))).detach())   # dF/dalpha [n]
    f, slope, a = (torch.cat(values).double().numpy(), torch.cat(slopes).double().numpy(),
                   alphas.double().numpy())
    change = f[-1] - f[0]
    steepest = int(np.abs(slope).argmax())
    print(f"step {args.step}: F(0) = {f[0]:.4f}, F(1) = {f[-1]:.4f}, change {change:.4f}; steepest dF/dalpha "
          f"{slope[steepest]:.1f} at alpha {a[steepest]:.4f}")
    for n in sorted({65, 257, 1025, args.points}):
        if n <= args.points:
            idx = np.linspace(0, args.points - 1, n).round().astype(int)
            total = np.trapezoid(slope[idx], a[idx])
            print(f"  {n:6d} points: completeness error {abs(total - change) / abs(change):.2%}")


if __name__ == "__main__":
    main()
