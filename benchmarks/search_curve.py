"""The beam curve's decoding over a slice of a test set: the library's beam search on the curve's batches,
one process (the path before), against the curve's own (explorer.studies.contrastive.curve.decode_set: compact
beam search, and the batches over worker processes), in the same process.

The first --sentences held-out pairs of a checkpoint (default the shipped Bible model, the curve's
1,002-verse goal: < 15 minutes on 2 cores), each --beams size, no length penalty and GNMT 0.6. Reported:
CPU seconds (this process and its finished worker processes: all the work, whatever the other jobs on
the machine do), wall seconds, and the ratio of each path's CPU to the reference's. On free cores the
two-worker path's wall time is about its CPU / 2 (the batches are shared out longest first). The
hypotheses are checked equal (ids and scores) on every sentence.
"""
from __future__ import annotations

import argparse
import resource
import time

import torch

from explorer.studies.contrastive.curve import Penalty, beam_config, decode_set, library_decode_set


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (the workers, once their pool closes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks search_curve", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default="checkpoints/bible-es-en")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--beams", default="8,32", help="comma-separated beam sizes")
    args = parser.parse_args(argv)

    from explorer.studies.common.command import checkpoint_and_held_out
    from explorer.studies.common.sentences import build_sentences

    torch.set_num_threads(1)
    loaded = checkpoint_and_held_out(args.checkpoint, "cpu")
    if loaded is None:
        return 2
    ckpt, pairs = loaded
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, args.sentences, "reference")
    paths = {"library, 1 process": lambda cfg: library_decode_set(ckpt.model, sents.src, cfg),
             "curve, 1 process": lambda cfg: decode_set(ckpt.model, sents.src, cfg, workers=1),
             "curve, 2 processes": lambda cfg: decode_set(ckpt.model, sents.src, cfg, workers=2)}
    print(f"{len(sents.src)} sentences of {args.checkpoint}, 1 thread per process; CPU s (wall s) and CPU ratio "
          "to the library's path")
    status = 0
    for penalty in (Penalty(), Penalty("gnmt", 0.6)):
        for beam in (int(b) for b in args.beams.split(",")):
            cfg, cells, outputs, reference = beam_config(beam, penalty), [], [], None
            for name, run in paths.items():
                c0, t0 = cpu_seconds(), time.perf_counter()
                outputs.append(run(cfg))
                cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
                reference = reference or cpu
                cells.append(f"{name} {cpu:.1f} ({wall:.1f}) x{cpu / reference:.2f}")
            equal = all((a.ids, a.score) == (b.ids, b.score) for out in outputs[1:] for a, b in zip(outputs[0], out))
            status = status if equal else 1
            print(f"{penalty.label:8s} beam {beam:2d}: " + " | ".join(cells) + f" | equal: {equal}", flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
