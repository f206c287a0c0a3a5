"""`python -m benchmarks concurrent`: many users' requests on one shared model, in threads vs one
after another, in the same process.

Each job is what one app user's "translate" costs on the Attention and Beam pages: beam search (5)
with its BeamTrace, then a teacher-forced forward of the best output inside capture() with every
capture point; every other job removes a cross-attention head (ablation hooks). The same jobs run
(a) one after another and (b) in N threads sharing the one loaded model; both at the same torch
thread count. The threads are started all at once, as users' requests arrive; the library's compute
queue (explorer.runtime.compute_queue) lets one per core compute at a time and the rest wait in line
($EXPLORER_COMPUTE_SLOTS=8 shows what all 8 computing at once would do). Printed: wall time of each, the throughput ratio sequential / threaded (> 1: threads
do more per second), and whether every threaded result (output ids, scores, every trace array) is
identical to its sequential run. Interleaved rounds, medians; no timing goal is asserted anywhere.
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def _job(model, tokenizer, text: str, ablate: list):
    from explorer.config import DecodeConfig
    from explorer.decoding.translate import attention_trace, translate

    t = translate(model, tokenizer, text, DecodeConfig(strategy="beam", beam_size=5), ablate=ablate, trace=True)
    best = t.hypotheses[0]
    trace = attention_trace(model, tokenizer, t.src_ids, best.ids, ablate=ablate)
    return best.ids, best.score, trace


def _same(a, b) -> bool:
    ids_a, score_a, trace_a = a
    ids_b, score_b, trace_b = b
    return (ids_a == ids_b and score_a == score_b and trace_a.names() == trace_b.names()
            and all(np.array_equal(trace_a[n], trace_b[n]) for n in trace_a.names()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks concurrent", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads (the app's default is 1)")
    args = parser.parse_args(argv)

    from explorer.data.files import read_tsv
    from explorer.inspection.hooks import capture_points
    from explorer.store.checkpoint import load_checkpoint

    torch.set_num_threads(args.torch_threads)
    ckpt = load_checkpoint(args.checkpoint)
    ckpt.model.eval()
    texts = [p.src for p in read_tsv(str(Path(args.checkpoint) / "test.tsv"))[:args.jobs]]
    ablations = [[("cross", 0, i % ckpt.model.cfg.n_heads)] if i % 2 else [] for i in range(args.jobs)]
    reference = [_job(ckpt.model, ckpt.tokenizer, t, a) for t, a in zip(texts, ablations)]   # warm-up too

    def sequential() -> list:
        return [_job(ckpt.model, ckpt.tokenizer, t, a) for t, a in zip(texts, ablations)]

    def threaded() -> list:
        out: list = [None] * len(texts)
        errors: list = []

        def run(i: int) -> None:
            try:
                out[i] = _job(ckpt.model, ckpt.tokenizer, texts[i], ablations[i])
            except Exception as err:  # noqa: BLE001 - counted and printed
                errors.append(repr(err))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(texts))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise RuntimeError(f"{len(errors)} threads failed: {errors[0]}")
        return out

    times = {"sequential": [], "threaded": []}
    identical = True
    for _ in range(args.rounds):
        for name, run in (("sequential", sequential), ("threaded", threaded)):
            t0 = time.perf_counter()
            results = run()
            times[name].append(time.perf_counter() - t0)
            identical &= all(_same(r, ref) for r, ref in zip(results, reference))
    leftover = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in ckpt.model.modules())
    seq, thr = statistics.median(times["sequential"]), statistics.median(times["threaded"])
    print(f"{args.jobs} jobs (beam 5 + BeamTrace + capture of every point; every other job ablates a head), "
          f"{args.rounds} interleaved rounds, torch threads {args.torch_threads}, {len(capture_points(ckpt.model))} "
          f"capture points")
    print(f"  one after another: {seq:.2f} s   {args.jobs} threads: {thr:.2f} s   "
          f"throughput threads / sequential: {seq / thr:.2f}x")
    print(f"  every threaded result identical to its single-threaded run: {identical}; hooks left on the model: "
          f"{leftover}")
    return 0 if identical and leftover == 0 else 1
