"""Attribution graphs on a shipped checkpoint with the dictionaries `python -m explorer features train` kept:
how exact the replacement model is, how much the features explain, and what a graph costs.

    python -m benchmarks graphs [--checkpoint checkpoints/numbers-en-de] [--sentences 20] [--kind trained]

For the first --sentences held-out pairs, every output position of the reference (EOS included): the graph
of that position (explorer.studies.graphs.job.run_graph, default settings), and over all of them the
largest replacement_logit_error (the replacement model on the sentence's own nodes against the model's
logits at positions 0..K, over the vocabulary), the largest logit_error (the logit against its bias plus
the edges into it), the mean replacement and completeness scores, the mean nodes and kept nodes, and the
seconds per graph (median and largest, with the machine's load: these machines are noisy). --kind random:
the random-decoder baselines instead; --stride S: every S-th position only. The dictionaries are read
from $EXPLORER_RUNS_DIR/features (or runs/features).

    python -m benchmarks graphs --routing 500 [--checkpoint checkpoints/numbers-en-de]

--routing N (the numbers model): in the first N held-out numbers, every German unit morpheme (drei, vier,
...) and the English unit word it translates (the k-th German unit with the k-th English one; numbers
whose counts differ, as a teen's, are left out): how often the graph of the German unit's logit puts the
largest influence on that English word's position (top_source_position), over all units and over the
inverted ones alone (German says the unit before the tens, "vier und neunzig" for "ninety four", so the
word is read from further along the source than the output has come).

    python -m benchmarks graphs --causal 200 [--checkpoint ...] [--longest 25] [--k 10]

--causal N: in N cases (held-out pairs whose source has at most --longest pieces, one output position of
each drawn at random, EOS excluded, seed 0), the graph's k feature nodes of largest influence on the
logit removed in the model (attention live, explorer.studies.graphs.intervene.causal_check), against k
active features drawn at random: how often the top nodes' removal lowers log p(output) by at least twice
the random ones' (and by something), with the median drops.

    python -m benchmarks graphs --speed 5 --checkpoint checkpoints/bible-es-en [--longest 25] [--position 20]

--speed N: the whole graph (run_graph: edges, pruning, scores, JSON) of output --position in the first N
held-out pairs whose source has --longest pieces (within 2) and whose reference has more than --position
pieces: the seconds per graph, median and largest, with the machine's load.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import torch

from explorer.evaluation.scores import held_out_pairs
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.features.job import load_all
from explorer.studies.graphs.attribution import attribute
from explorer.studies.graphs.intervene import causal_check
from explorer.studies.graphs.job import GraphSettings, run_graph
from explorer.studies.graphs.replacement import Replacement
from explorer.studies.graphs.step import question


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks graphs")
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "numbers-en-de"))
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--kind", choices=("trained", "random"), default="trained")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stride", type=int, default=1, help="every S-th output position")
    parser.add_argument("--routing", type=int, default=0, help="the numbers model's unit words in N numbers")
    parser.add_argument("--causal", type=int, default=0, help="top-k nodes against k random ones in N cases")
    parser.add_argument("--longest", type=int, default=25, help="--causal: sources of at most this many pieces")
    parser.add_argument("--k", type=int, default=10, help="--causal: nodes removed")
    parser.add_argument("--speed", type=int, default=0, help="seconds per graph in N sentences of --longest pieces")
    parser.add_argument("--position", type=int, default=20, help="--speed: the output position explained")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    tcs = {site: kinds[args.kind] for site, kinds in load_all(ckpt.model, ckpt.meta["weights_sha256"]).items()}
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    context = RunContext(meta=ckpt.meta)
    if args.routing:
        return routing(ckpt, tcs, pairs[:args.routing], context)
    if args.speed:
        return speed(ckpt, tcs, pairs, args.speed, args.longest, args.position, context)
    if args.causal:
        return causal(ckpt, tcs, pairs, args.causal, args.longest, args.k)
    rows, seconds = [], []
    for pair in pairs[:args.sentences]:
        length = len(ckpt.tokenizer.encode(pair.tgt, side="tgt")) + 1
        for position in range(0, length, args.stride):
            start = time.perf_counter()
            got = run_graph(ckpt.model, ckpt.tokenizer, pair.src, tcs, GraphSettings(position=position),
                            target=pair.tgt, context=context)
            seconds.append(time.perf_counter() - start)
            rows.append(got)
    print(f"{ckpt.name}, {args.kind} dictionaries: {len(rows)} graphs ({args.sentences} sentences, every "
          f"{'' if args.stride == 1 else f'{args.stride}th '}position)")
    print(f"largest replacement_logit_error {max(r['replacement_logit_error'] for r in rows):.2e}, "
          f"largest logit_error {max(r['logit_error'] for r in rows):.2e}")
    print(f"replacement score {statistics.mean(r['scores']['replacement'] for r in rows):.3f}, completeness "
          f"{statistics.mean(r['scores']['completeness'] for r in rows):.3f} (means)")
    sizes = [sum(r["counts"][k] for k in ("features", "errors", "tokens")) + 1 for r in rows]
    print(f"nodes {statistics.mean(sizes):.0f}, "
          f"kept {statistics.mean(r['counts']['kept_nodes'] for r in rows):.0f} (means)")
    print(f"seconds per graph: median {statistics.median(seconds):.2f}, largest {max(seconds):.2f} "
          f"({args.threads} threads, load {os.getloadavg()[0]:.1f})")
    return 0


UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
GERMAN = ({"ein", "eins"}, {"zwei"}, {"drei"}, {"vier"}, {"fünf"}, {"sechs"}, {"sieben"}, {"acht"}, {"neun"})


def routing(ckpt, tcs, pairs, context) -> int:
    tok = ckpt.tokenizer
    hits = inverted_hits = total = inverted = skipped = 0
    start = time.perf_counter()
    for pair in pairs:
        src = [tok.id_to_piece(i, "src").lstrip("\u2581") for i in tok.encode(pair.src, side="src")]
        out = [tok.id_to_piece(i, "tgt").lstrip("\u2581") for i in tok.encode(pair.tgt, side="tgt")]
        english = [t for t, w in enumerate(src) if w in UNITS]
        german = [k for k, w in enumerate(out) if any(w in units for units in GERMAN)]
        if len(english) != len(german):
            skipped += 1
            continue
        for t, k in zip(english, german):
            got = run_graph(ckpt.model, tok, pair.src, tcs, GraphSettings(position=k), target=pair.tgt, context=context)
            hit = got["top_source_position"] == t
            flipped = k + 1 < len(out) and out[k + 1] == "und"
            hits, total = hits + hit, total + 1
            inverted_hits, inverted = inverted_hits + (hit and flipped), inverted + flipped
    print(f"{ckpt.name}: the German unit's graph puts the most influence on the English unit word in {hits}/{total} "
          f"units ({hits / max(total, 1):.1%}); inverted units (unit und tens) {inverted_hits}/{inverted} "
          f"({inverted_hits / max(inverted, 1):.1%}); {skipped} of {len(pairs)} numbers left out (unit counts differ); "
          f"{time.perf_counter() - start:.0f} s")
    return 0


def causal(ckpt, tcs, pairs, n: int, longest: int, k: int) -> int:
    tok, model = ckpt.tokenizer, ckpt.model
    rng = random.Random(0)
    generator = torch.Generator().manual_seed(0)
    checks, seconds = [], []
    for pair in pairs:
        if len(checks) == n:
            break
        if len(tok.encode(pair.src, side="src")) + 1 > longest:
            continue
        length = len(tok.encode(pair.tgt, side="tgt"))
        if length == 0:
            continue
        start = time.perf_counter()
        asked = question(model, tok, pair.src, rng.randrange(length), target=pair.tgt)
        graph = attribute(Replacement(model, tcs, asked.step), 64)
        checks.append(causal_check(model, tcs, graph, k, generator))
        seconds.append(time.perf_counter() - start)
        if len(checks) % 10 == 0:            # a long run's partial figures (the bible model's take an hour)
            print(f"  {len(checks)} cases: {sum(c.holds for c in checks)} hold", flush=True)
    held = sum(c.holds for c in checks)
    print(f"{ckpt.name}: removing the top-{k} feature nodes by influence lowered log p(output) by >= 2x the drop "
          f"from removing {k} random active features in {held}/{len(checks)} cases ({held / max(len(checks), 1):.1%}); "
          f"median drop {statistics.median(c.drop_top for c in checks):.3f} (top) vs "
          f"{statistics.median(c.drop_random for c in checks):.3f} (random) nats; sources <= {longest} pieces; "
          f"{statistics.median(seconds):.1f} s per case (median), load {os.getloadavg()[0]:.1f}")
    return 0


def speed(ckpt, tcs, pairs, n: int, longest: int, position: int, context) -> int:
    tok, seconds, sizes = ckpt.tokenizer, [], []
    for pair in pairs:
        if len(seconds) == n:
            break
        pieces = len(tok.encode(pair.src, side="src")) + 1
        if abs(pieces - longest) > 2 or len(tok.encode(pair.tgt, side="tgt")) <= position:
            continue
        start = time.perf_counter()
        got = run_graph(ckpt.model, tok, pair.src, tcs, GraphSettings(position=position), target=pair.tgt,
                        context=context)
        seconds.append(time.perf_counter() - start)
        sizes.append((pieces, got["counts"]["features"]))
    print(f"{ckpt.name}: {len(seconds)} graphs at position {position}, sources of {longest} +- 2 pieces "
          f"(pieces, features: {sizes}): median {statistics.median(seconds):.1f} s, largest {max(seconds):.1f} s "
          f"({torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f})")
    return 0
