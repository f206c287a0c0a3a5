"""A contrastive attribution of one step of decoding: its cost against a plain translation of the same
source, in the same process.

One thread (default): a random model at the `small` preset (vocab 8000, the shipped Bible model's shape)
and at the paper's base size with an OPUS-MT vocabulary of 58101 pieces and Marian's options
(benchmarks.marian.marian_config, as benchmarks.contributions builds it). On each, a --src-len-token
source; the plain translation is beam search of 5 (the app's default), outputs cut at the source's length
+ 5; the step attributed is the one after a --prefix-len-token prefix, contrasted with another token.
Timed round-robin after warm-up: the translation, explorer.studies.contrastive.attribution.contrast_step by
gradient x input and by integrated gradients at the default points (the page's; also without the plain
attribution beside the contrast, which halves the rows) and at 128 (the test's).
Medians of process CPU time and of wall time; the ratio is against the translation's CPU time. Goals
(integrated gradients at the default points, both functions: the contrast and the plain attribution):
< 1 s on small, < 5 s at base size, judged on CPU time (one thread: it does not count the waits for a
core that other jobs cause).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.contributions import ids, model_of
from benchmarks.decode import time_rounds
from explorer.studies.common.gradients import IG_STEPS
from explorer.config import DecodeConfig
from explorer.studies.contrastive.attribution import contrast_step
from explorer.decoding.translate import decode

GOALS = {"small": 1.0, "base": 5.0}         # seconds per step, integrated gradients at IG_STEPS


def measure(size: str, src_len: int, prefix_len: int, warmup: int, repeats: int) -> dict:
    model = model_of(size)
    src, out = ids(model, src_len, 1), ids(model, prefix_len + 2, 2)
    prefix, chosen, foil = out[:prefix_len], out[prefix_len], out[0]
    cfg = DecodeConfig(beam_size=5, n_best=1, max_len_a=1.0, max_len_b=5)
    variants = {
        "translation": lambda: decode(model, [src], cfg),
        "grad-x-input": lambda: contrast_step(model, src, prefix, chosen, foil, "grad-x-input"),
        f"IG {IG_STEPS}": lambda: contrast_step(model, src, prefix, chosen, foil, "integrated-gradients", IG_STEPS),
        f"IG {IG_STEPS} contrast only": lambda: contrast_step(model, src, prefix, chosen, foil, "integrated-gradients",
                                                             IG_STEPS, plain=False),
        "IG 128": lambda: contrast_step(model, src, prefix, chosen, foil, "integrated-gradients", 128),
    }
    wall, cpu = time_rounds(variants, warmup, repeats)
    return {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks contrastive", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=tuple(GOALS), default=list(GOALS))
    parser.add_argument("--src-len", type=int, default=25, help="source tokens, EOS included")
    parser.add_argument("--prefix-len", type=int, default=12, help="target tokens before the attributed step")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    print(f"contrastive attribution of one step ({args.src_len}-token source, {args.prefix_len}-token prefix) vs a "
          f"beam-5 translation, torch {torch.__version__}, {torch.get_num_threads()} thread(s), median of "
          f"{args.repeats} after {args.warmup} warm-up; CPU ms (wall ms) and the ratio to the translation's CPU")
    status = 0
    for size in args.sizes:
        m = measure(size, args.src_len, args.prefix_len, args.warmup, args.repeats)
        base_cpu = m["translation"][0]
        cells = [f"{name} {1000 * c:.0f} ({1000 * w:.0f}) x{c / base_cpu:.1f}" for name, (c, w) in m.items()]
        goal_cpu = m[f"IG {IG_STEPS}"][0]
        met = goal_cpu < GOALS[size]
        status = status if met else 1
        print(f"{size:6s} " + " | ".join(cells) + f" | IG {IG_STEPS} {'<' if met else 'NOT <'} {GOALS[size]} s")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
