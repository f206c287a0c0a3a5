"""Attribution graphs on a shipped checkpoint with the dictionaries `python -m explorer features train` kept:
how exact the replacement model is, how much the features explain, and what a graph costs.

    python -m benchmarks graphs [--checkpoint checkpoints/numbers-en-de] [--sentences 20] [--kind trained]

For the first --sentences held-out pairs, every output position of the reference (EOS included): the graph
of that position (explorer.studies.graphs.job.run_graph, default settings), and over all of them the
largest replacement_logit_error (the replacement model on the sentence's own nodes against the model's
logits, over the vocabulary), the largest logit_error (the logit against its bias plus the edges into it),
the mean replacement and completeness scores, the mean nodes and kept nodes, and the seconds per graph
(median and largest, with the machine's load: these machines are noisy). --kind random: the random-decoder
baselines instead. The dictionaries are read from $EXPLORER_RUNS_DIR/features (or runs/features).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from explorer.evaluation.scores import held_out_pairs
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.features.job import load_all
from explorer.studies.graphs.job import GraphSettings, run_graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks graphs")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "numbers-en-de"))
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--kind", choices=("trained", "random"), default="trained")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    tcs = {site: kinds[args.kind] for site, kinds in load_all(ckpt.model, ckpt.meta["weights_sha256"]).items()}
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    context = RunContext(meta=ckpt.meta)
    rows, seconds = [], []
    for pair in pairs[:args.sentences]:
        length = len(ckpt.tokenizer.encode(pair.tgt, side="tgt")) + 1
        for position in range(length):
            start = time.perf_counter()
            got = run_graph(ckpt.model, ckpt.tokenizer, pair.src, tcs, GraphSettings(position=position),
                            target=pair.tgt, context=context)
            seconds.append(time.perf_counter() - start)
            rows.append(got)
    print(f"{ckpt.name}, {args.kind} dictionaries: {len(rows)} graphs ({args.sentences} sentences, every position)")
    print(f"largest replacement_logit_error {max(r['replacement_logit_error'] for r in rows):.2e}, "
          f"largest logit_error {max(r['logit_error'] for r in rows):.2e}")
    print(f"replacement score {statistics.mean(r['scores']['replacement'] for r in rows):.3f}, completeness "
          f"{statistics.mean(r['scores']['completeness'] for r in rows):.3f} (means)")
    print(f"nodes {statistics.mean(sum(r['counts'][k] for k in ('features', 'errors', 'tokens')) + 1 for r in rows):.0f}, "
          f"kept {statistics.mean(r['counts']['kept_nodes'] for r in rows):.0f} (means)")
    print(f"seconds per graph: median {statistics.median(seconds):.2f}, largest {max(seconds):.2f} "
          f"({args.threads} threads, load {os.getloadavg()[0]:.1f})")
    return 0
