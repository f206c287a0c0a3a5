"""`python -m explorer.align CHECKPOINT [--gold FILE] [--out FILE]`: the alignment scorecard.

Scores every aligner (cross-attention heads and layers, naive and Shift-Att, value-norm weighted;
gradient x input; integrated gradients; eflomal) against a gold set: the file given, else the one
that ships for the checkpoint (explorer.align.gold_sets). Prints the table, writes the JSON atomically.
"""
from __future__ import annotations

import argparse
import sys
from functools import partial


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.align", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--gold", help="a gold file: source ||| target ||| links (i-j sure, i?j possible), "
                                       "one pair per line; default: the checkpoint's shipped gold set")
    parser.add_argument("--out", default="alignment.json", help="the JSON file to write (default alignment.json)")
    parser.add_argument("--pairs", type=int, default=200, help="the first N gold pairs (default 200)")
    parser.add_argument("--attribution-pairs", type=int, default=60,
                        help="gradient methods on the first N of them (default 60; 0 skips them)")
    parser.add_argument("--ig-steps", type=int, default=32, help="integrated-gradients path points (default 32)")
    parser.add_argument("--no-eflomal", action="store_true", help="leave out the statistical aligner")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    from explorer.align.job import run_to_file, training_pairs
    from explorer.align.gold import GoldError
    from explorer.align.gold_sets import gold_from, held_out_share
    from explorer.align.report import report
    from explorer.align.scorecard import AlignSettings
    from explorer.data import DataError
    from explorer.evaluation.scores import held_out_pairs
    from explorer.evaluation.progress import run_command
    from explorer.store.checkpoint import CheckpointError, load_checkpoint

    try:
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
        try:
            held, _ = held_out_pairs(ckpt.path, ckpt.meta)
        except DataError:
            held = []
        gold, name = gold_from(args.gold, ckpt.meta, held)
        settings = AlignSettings(pairs=args.pairs, attribution_pairs=args.attribution_pairs,
                                 ig_steps=args.ig_steps, eflomal=not args.no_eflomal)
    except (CheckpointError, GoldError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return run_command(partial(run_to_file, ckpt.model, ckpt.tokenizer, gold, settings, args.out, meta=ckpt.meta,
                               gold_name=name, held_out=held_out_share(gold, held) if held else None,
                               train_pairs=lambda: training_pairs(ckpt.meta, held)), report, args.out)


if __name__ == "__main__":
    sys.exit(main())
