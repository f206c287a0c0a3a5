"""ALTI+ contributions of one sentence: their cost against a plain teacher-forced forward of the same pair.

One process, one thread (default): a random model at the `small` preset (vocab 8000, the shipped
Bible model's shape) and at the paper's base size with an OPUS-MT vocabulary of 58101 pieces and Marian's
options (benchmarks.marian.marian_config: swish, halves, tied, logits bias, Marian's ids). On each, one
--src-len-token source and a --tgt-len-token forced output (EOS included), timed round-robin after
warm-up: a plain teacher-forced forward (log-probs, no hooks), and explorer.studies.contributions.
sentence_contributions (its own hooked forward, every block's decomposition, the rollout). Medians of
process CPU time and of wall time; the ratio says what the analysis costs beyond reading the model once.
Goals: < 0.2 s on small, < 1 s at base size, judged on CPU time (with one thread it equals wall time on
an idle machine, and it does not count the waits for a core that other jobs cause).

--faithfulness (small model only, one round after one warm-up): the faithfulness scorecard's gradient
methods by the reference path (captum, one backward per target and path point:
explorer.studies.align.attribution.piece_attributions(path="captum")) against the batched path
(explorer.studies.common.gradients.attributions), the same numbers; and one sentence's whole scorecard
(every method, 3 random seeds, 16 path points) with what 200 such sentences cost on 2 workers.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.decode import time_rounds
from benchmarks.marian import OPUS_VOCAB, marian_config
from explorer.config import preset
from explorer.studies.contributions import sentence_contributions
from explorer.model import Transformer

GOALS = {"small": 0.2, "base": 1.0}         # seconds per sentence


def model_of(size: str) -> Transformer:
    cfg = (preset("small", src_vocab_size=8000, tgt_vocab_size=8000, dropout=0.0) if size == "small"
           else marian_config("base", OPUS_VOCAB))
    torch.manual_seed(0)
    return Transformer(cfg).eval()


def ids(model: Transformer, length: int, seed: int) -> list[int]:
    """`length` random ordinary ids ending in the model's EOS."""
    special = model.cfg.special
    avoid = {special.pad, special.start, special.eos, special.unk}
    g = torch.Generator().manual_seed(seed)
    picked = [int(i) for i in torch.randint(0, model.cfg.src_vocab_size, (4 * length,), generator=g) if int(i) not in avoid]
    return picked[:length - 1] + [special.eos]


def measure(size: str, src_len: int, tgt_len: int, warmup: int, repeats: int) -> dict:
    model = model_of(size)
    src, out = ids(model, src_len, 1), ids(model, tgt_len, 2)
    src_t = torch.tensor([src])                                                  # [1, S]
    tgt_in = torch.tensor([[model.cfg.special.start] + out[:-1]])               # [1, T]

    def forward():
        with torch.inference_mode():
            return model(src_t, tgt_in)                                          # [1, T, V]

    wall, cpu = time_rounds({"forward": forward, "contributions": lambda: sentence_contributions(model, src, out)},
                            warmup, repeats)
    return {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in wall}


def faithfulness(src_len: int, tgt_len: int) -> None:
    from explorer.studies.align.attribution import piece_attributions
    from explorer.studies.align.pairs import ModelPair
    from explorer.studies.contributions.faithfulness import FaithfulnessSettings, sentence_faithfulness
    from explorer.studies.common.gradients import attributions

    model = model_of("small")
    src, out = ids(model, src_len, 1), ids(model, tgt_len, 2)
    pair = ModelPair(gold=None, src_ids=src, out_ids=out, src_groups=[], tgt_groups=[])
    print(f"faithfulness, small, {src_len}-token source, {tgt_len}-token output, 16 path points (CPU s)")
    for method in ("grad-x-input", "integrated-gradients"):
        _, cpu = time_rounds({"captum rows": lambda: piece_attributions(model, pair, method, 16, path="captum"),
                              "batched": lambda: attributions(model, src, out, method, 16)}, 1, 1)
        old, new = cpu["captum rows"][0], cpu["batched"][0]
        print(f"  {method:22s} captum per row {old:7.2f}  batched {new:7.2f}  ratio {old / new:5.1f}")
    _, cpu = time_rounds({"sentence": lambda: sentence_faithfulness(model, src, out, FaithfulnessSettings())}, 1, 1)
    each = cpu["sentence"][0]
    print(f"  whole scorecard of the sentence {each:.2f} s; 200 such sentences on 2 workers ~ {200 * each / 2 / 60:.1f} min")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks contributions", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=tuple(GOALS), default=list(GOALS))
    parser.add_argument("--src-len", type=int, default=25, help="source tokens, EOS included")
    parser.add_argument("--tgt-len", type=int, default=25, help="forced output tokens, EOS included")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--faithfulness", action="store_true",
                        help="also the faithfulness scorecard's gradients, old path against new, and one sentence's scorecard")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    print(f"ALTI+ of one {args.src_len}-token source and {args.tgt_len}-token output, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), median of {args.repeats} after {args.warmup} warm-up")
    print(f"{'model':8s} {'forward CPU ms':>15s} {'ALTI+ CPU ms':>13s} {'ALTI+ wall ms':>14s} {'ratio':>6s} {'goal':>7s}")
    status = 0
    for size in args.sizes:
        m = measure(size, args.src_len, args.tgt_len, args.warmup, args.repeats)
        (f_cpu, _), (c_cpu, c_wall) = m["forward"], m["contributions"]
        met = c_cpu < GOALS[size]                # CPU time: one thread, steady when others share the cores
        status = status if met else 1
        print(f"{size:8s} {1000 * f_cpu:15.1f} {1000 * c_cpu:13.1f} {1000 * c_wall:14.1f} {c_cpu / f_cpu:6.1f} "
              f"{'<' if met else 'NOT <'} {GOALS[size]} s")
    if args.faithfulness:
        faithfulness(args.src_len, args.tgt_len)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
