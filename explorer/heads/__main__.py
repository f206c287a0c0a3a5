"""`python -m explorer.heads CHECKPOINT`: the head lab on a checkpoint's held-out test pairs.

Prints the estimated cost first, then the tables (explorer.heads.report), and writes the JSON
(explorer.heads.job) atomically to --out (default: head_lab.json beside the current directory).
"""
from __future__ import annotations

import argparse
import sys
from functools import partial

from explorer.heads.sentences import FORCED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.heads", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--sentences", type=int, default=200, help="the first N held-out pairs (default 200)")
    parser.add_argument("--out", default="head_lab.json", help="the JSON file to write (default head_lab.json)")
    parser.add_argument("--forced", choices=FORCED, default="reference",
                        help="teacher-force the reference (default) or the model's own greedy output")
    parser.add_argument("--seeds", type=int, default=3, help="random removal orders, the baseline (default 3)")
    parser.add_argument("--points", type=int, default=3,
                        help="scored points per kind's pruning curve after the first; all kinds together: 2x")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    from explorer.evaluation.scores import held_out_pairs
    from explorer.heads.job import LabSettings, run_to_file
    from explorer.heads.report import report
    from explorer.evaluation.progress import run_command
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    try:
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
        pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
        settings = LabSettings(sentences=args.sentences, forced=args.forced, seeds=args.seeds, points=args.points)
    except (CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return run_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, pairs, settings, args.out, meta=ckpt.meta),
                       report, args.out)


if __name__ == "__main__":
    sys.exit(main())
