"""What the layer analyses cost: the lens sweep and a full patching grid, against one plain translation.

One process, one thread (--threads), random weights of the `small` preset (vocab 8000) and of the
base size (6+6 layers, 8 heads, d 512, the 58,101-piece OPUS-MT vocabulary), a --src-len-token source
and outputs forced to exactly --out-len tokens (EOS forbidden until then), so every variant does the
same decoder work whatever the random weights prefer:
* reference: one greedy translation (explorer.decoding.greedy_search);
* lens sweep: the DecoderLens over every encoder depth (one batched greedy decode) plus the logit lens
  over the model's output (one teacher-forced forward, the generator on every decoder layer);
* patching grid: every grid of one minimal pair (encoder depth x source position, decoder layer x target
  position, layer x head of the three attention kinds, the changed word per depth), denoising and noising;
  the pair is measured after --prefix shared output tokens;
* cell pick: what the Causes page computes when a cell is picked (webapp.analyses.patched_translation):
  the pair's clean and corrupted runs kept (PairRuns: two teacher-forced forwards) and the patched run's
  own greedy translation (PairRuns.translation: one decode, up to 1.5 x source + 10 tokens, EOS allowed),
  for a cell of the encoder (layer 1's output at the changed position) and of the decoder (the last
  layer's first cross-attention head); the pair itself (two greedy decodes) is cached by the page;
* cell pick, runs kept: a later pick of the same pair (the page keeps the two runs): the decode alone.
Medians of process CPU time and wall time, the ratio to the reference, and the goals (lens sweep < 0.5 s
on small, < 3 s at base size; a patching grid < 5 s on small, < 60 s at base size).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from explorer.config import DecodeConfig, preset
from explorer.decoding import greedy_search
from explorer.studies.lens.decoder_lens import decoder_lens
from explorer.studies.lens.logit_lens import logit_lens
from explorer.model import Transformer
from explorer.studies.patching.grids import pair_grids
from explorer.studies.patching.pair import MinimalPair
from explorer.studies.patching.runs import Cell, PairRuns

BASE_VOCAB = 58101
GOALS = {("small", "lens sweep"): 0.5, ("base", "lens sweep"): 3.0,
         ("small", "patching grid"): 5.0, ("base", "patching grid"): 60.0}


def model_of(size: str) -> Transformer:
    torch.manual_seed(0)
    if size == "small":
        return Transformer(preset("small", src_vocab_size=8000, tgt_vocab_size=8000, dropout=0.0)).eval()
    return Transformer(preset("base", src_vocab_size=BASE_VOCAB, tgt_vocab_size=BASE_VOCAB, dropout=0.0)).eval()


def bench_pair(model: Transformer, src: list[int], prefix: list[int]) -> MinimalPair:
    """A pair of `src` and `src` with its second id changed, measured after `prefix`. Random weights
    barely read the source, so the two runs' top-1 tokens are often the same: the measured tokens are
    the ones each run favours most over the other (any two tokens cost the same to measure)."""
    start = model.cfg.special.start
    tgt_in = torch.tensor([[start] + prefix])
    corrupt = src[:1] + [(src[1] + 1) % model.cfg.src_vocab_size or 4] + src[2:]
    with torch.inference_mode():
        clean_lp = model(torch.tensor([src]), tgt_in)[0, -1]                     # [V]
        corrupt_lp = model(torch.tensor([corrupt]), tgt_in)[0, -1]               # [V]
    clean, other = int((clean_lp - corrupt_lp).argmax()), int((corrupt_lp - clean_lp).argmax())
    return MinimalPair(clean_src=src, corrupt_src=corrupt, changed=[1], prefix=prefix, clean_token=clean,
                       corrupt_token=other, clean_output=prefix + [clean], corrupt_output=prefix + [other])


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median CPU seconds, median wall seconds) of `repeats` runs after one warm-up."""
    fn()
    cpu, wall = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(cpu), statistics.median(wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks layers", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="small,base", help="comma-separated: small, base")
    parser.add_argument("--src-len", type=int, default=25, help="source tokens, EOS included")
    parser.add_argument("--out-len", type=int, default=25, help="output tokens every decode is forced to")
    parser.add_argument("--prefix", type=int, default=12, help="shared output tokens before the patched position")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    cfg = DecodeConfig(strategy="greedy", max_len_a=0.0, max_len_b=args.out_len, min_len=args.out_len)
    print(f"{args.src_len}-token source, outputs of {args.out_len} tokens, patched after {args.prefix}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), median of {args.repeats} after 1 warm-up")
    print(f"{'model':6s} {'variant':20s} {'CPU s':>8s} {'wall s':>8s} {'x translation':>14s}  goal")
    for size in args.sizes.split(","):
        model = model_of(size)
        eos = model.cfg.special.eos
        generator = torch.Generator().manual_seed(1)
        src = torch.randint(4, model.cfg.src_vocab_size, (args.src_len - 1,), generator=generator).tolist() + [eos]
        output = greedy_search(model, [src], cfg)[0].best.ids
        assert len(output) == args.out_len, len(output)
        pair = bench_pair(model, src, output[:args.prefix])

        def sweep():
            decoder_lens(model, [src], cfg)
            logit_lens(model, None, src, output)

        cells = {"cell pick, encoder": Cell("encoder.layers.0.resid_post", (1,)),
                 "cell pick, decoder": Cell(f"decoder.layers.{model.cfg.n_decoder_layers - 1}.cross_attn.context", (0,))}
        variants = {"translation": lambda: greedy_search(model, [src], cfg), "lens sweep": sweep,
                    "patching grid": lambda: pair_grids(model, pair),
                    **{name: (lambda c=c: PairRuns(model, pair).translation(c)) for name, c in cells.items()}}
        kept_runs = PairRuns(model, pair)
        cells["cell pick, runs kept"] = cells["cell pick, decoder"]
        variants["cell pick, runs kept"] = lambda: kept_runs.translation(cells["cell pick, decoder"])
        measured = {name: timed(fn, args.repeats) for name, fn in variants.items()}
        reference = measured["translation"][0]
        for name, (cpu, wall) in measured.items():
            goal = GOALS.get((size, name))
            verdict = "" if goal is None else f"< {goal:g} s: {'met' if cpu < goal else 'MISSED'}"
            if name in cells:
                tokens = len(PairRuns(model, pair).translation(cells[name]).best.ids)
                verdict = f"{tokens} output tokens"
            print(f"{size:6s} {name:20s} {cpu:8.3f} {wall:8.3f} {cpu / reference:13.1f}x  {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
