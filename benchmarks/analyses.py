"""The test-set analyses at OPUS-MT size and on `small`: the head lab and the alignment scorecard, one
process against the split over every core, in the same run.

The models the project opens are OPUS-MT (Marian) models: base size (6+6 layers x 8 heads, d_model
512, d_ff 2048) with a 58,101-piece vocabulary, 144 heads where `small` has 36. Each analysis is
run as its command (`python -m explorer heads|align ...`, a fresh process, loading included) on a
few sentences, first on the path before (`--workers 1`, and for the head lab `--no-reuse`: every
removal decoded step by step) then as the commands run now (split over `--workers N` processes under
torchrun; the head lab checks single-head removals in one pass, explorer.heads.verify), one after the
other per model so load from other processes hits both.
Printed per run: seconds, decodes (head lab) or pairs (scorecard) per second, CPU utilisation
(the processes' CPU time / wall time, in cores), whether its JSON numbers equal the one-process run's
(timings left out), and the time the command's defaults would take (200 sentences, 3 seeds; the
scorecard's 200 pairs, 60 with attributions, 32 integrated-gradients steps, eflomal left out: it
does not grow with the model), projected stage by stage from the stage times the result records.

The base model is random (tests/support/base_model.build_base_checkpoint: Marian's options, a 58k
word-level vocabulary) unless --base names a checkpoint; it reads the Bible test pairs and the
Bible gold set. A random model's greedy outputs run to the length limit (1.5 x source + 10), a
trained model's stop near the reference length, so its decoding figures are an upper bound.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from explorer.files.places import REPO_ROOT
from explorer.runtime.clock import TIMING_KEYS
from explorer.runtime.workers import cores

SMALL = REPO_ROOT / "checkpoints" / "bible-es-en"
GOLD = REPO_ROOT / "gold" / "bible-es-en.align"
DEFAULTS = {"heads": {"sentences": 200, "seeds": 3}, "align": {"pairs": 200, "attribution_pairs": 60}}


def build_base(folder: Path) -> Path:
    """A random base-size checkpoint with Marian's options and a 58k vocabulary, with the Bible test pairs."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from support.base_model import build_base_checkpoint

    path = build_base_checkpoint(folder)
    shutil.copy(SMALL / "test.tsv", path / "test.tsv")
    return path


def run_command(argv: list[str]) -> dict:
    """One analysis command in a fresh process: wall seconds, CPU seconds of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "explorer", *argv], capture_output=True, text=True, cwd=REPO_ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu}


def numbers(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMING_KEYS}


def project_heads(result: dict, sentences: int, default_decodes: int) -> float:
    """Seconds at 200 sentences and 3 seeds: each stage scaled by sentences (pruning also by its decodes)."""
    stage, scale = result["stage_seconds"], DEFAULTS["heads"]["sentences"] / sentences
    heads = result["cost"]["heads"]
    measured_points = max(1, result["pruning"]["decodes"] - heads - 1)
    return (stage.get("sentences", 0) + scale * (stage["statistics"] + stage["importance"]
            + stage["single-head removal"]) + scale * stage["pruning"] * (default_decodes - heads - 1) / measured_points)


def project_align(result: dict, pairs: int, attribution_pairs: int) -> float:
    stage = result["stage_seconds"]
    seconds = stage["attention"] * DEFAULTS["align"]["pairs"] / pairs
    for method in ("grad-x-input", "integrated-gradients"):
        seconds += stage.get(method, 0.0) * DEFAULTS["align"]["attribution_pairs"] / max(1, attribution_pairs)
    return seconds


def default_decodes(checkpoint: Path) -> int:
    """Greedy decodes of the set the head lab's defaults make on this model (its cost estimate)."""
    from explorer.heads.job import LabSettings, estimate_cost
    from explorer.store.checkpoint import load_checkpoint

    model = load_checkpoint(str(checkpoint)).model
    return estimate_cost(model, LabSettings(), DEFAULTS["heads"]["sentences"]).decodes


def profile_removals(checkpoint: Path, sentences: int) -> None:
    """Where a single-head removal's time goes (1 thread, one process, the path before the checks):
    three heads removed, each a greedy decode of the set and a teacher-forced loss, under torch's
    profiler; prints CPU seconds per part and the operators by self CPU time."""
    import torch

    from explorer.evaluation.arguments import checkpoint_and_held_out
    from explorer.heads.importance import HeadRemover, all_heads, teacher_loss
    from explorer.heads.sentences import build_sentences

    torch.set_num_threads(1)
    ckpt, pairs = checkpoint_and_held_out(str(checkpoint), "cpu")
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, sentences)
    remover = HeadRemover(ckpt.model, ckpt.tokenizer, sents, reuse=False)
    remover.scores(())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for head in all_heads(ckpt.model)[::50][:3]:
            start = time.process_time()
            remover.scores([head])
            middle = time.process_time()
            teacher_loss(ckpt.model, sents, [head])
            print(f"{checkpoint.name} {head}: greedy decode {middle - start:.2f} s CPU, teacher-forced loss "
                  f"{time.process_time() - middle:.2f} s CPU ({sentences} sentences)", flush=True)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks analyses", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="small,base", help="small, base or both (default small,base)")
    parser.add_argument("--base", help="a base-size checkpoint to use instead of a random one")
    parser.add_argument("--analyses", default="heads,align", help="heads, align or both")
    parser.add_argument("--sentences", type=int, default=10, help="head lab sentences (default 10)")
    parser.add_argument("--seeds", type=int, default=1, help="head lab random orders (default 1)")
    parser.add_argument("--pairs", type=int, default=10, help="scorecard gold pairs (default 10)")
    parser.add_argument("--attribution-pairs", type=int, default=2, help="of them with attributions (default 2)")
    parser.add_argument("--workers", type=int, default=cores(), help="processes of the split run (default: cores)")
    parser.add_argument("--profile", action="store_true",
                        help="profile three single-head removals per model (1 thread) instead of the timings")
    args = parser.parse_args(argv)
    print(f"{cores()} cores; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-analyses-") as tmp:
        models = {}
        for name in args.models.split(","):
            models[name] = SMALL if name == "small" else Path(args.base) if args.base else build_base(Path(tmp))
        for name, checkpoint in models.items():
            if args.profile:
                profile_removals(checkpoint, args.sentences)
                continue
            decodes = default_decodes(checkpoint) if "heads" in args.analyses else 0
            for analysis in args.analyses.split(","):
                if analysis == "heads":
                    extra = ["--sentences", str(args.sentences), "--seeds", str(args.seeds)]
                else:
                    extra = ["--gold", str(GOLD), "--pairs", str(args.pairs), "--attribution-pairs",
                             str(args.attribution_pairs), "--no-eflomal"]
                results = {}
                for workers in (1, args.workers):
                    out = Path(tmp) / f"{name}-{analysis}-{workers}.json"
                    before = ["--no-reuse"] if analysis == "heads" and workers == 1 else []
                    timing = run_command([analysis, str(checkpoint), *extra, *before, "--workers", str(workers),
                                          "--out", str(out)])
                    result = json.loads(out.read_text())
                    if analysis == "heads":
                        rate = f"{result['pruning']['decodes'] / timing['wall']:.2f} decodes/s"
                        projected = project_heads(result, args.sentences, decodes)
                    else:
                        rate = f"{result['gold']['pairs'] / timing['wall']:.2f} pairs/s"
                        projected = project_align(result, result["gold"]["pairs"],
                                                  min(args.attribution_pairs, result["gold"]["pairs"]))
                    results[workers] = (timing, result)
                    same = "" if workers == 1 else ("yes" if numbers(result) == numbers(results[1][1]) else "NO")
                    label = "before" if workers == 1 else f"now, {workers} processes"
                    print(f"{name:5} {analysis:5} {label:>14}: {timing['wall']:7.1f} s  {rate:>15}  CPU "
                          f"{timing['cpu'] / timing['wall']:.2f} of {cores()} cores  defaults ~{projected / 60:6.1f} min  "
                          f"same numbers: {same or '-'}  stages {result['stage_seconds']} {result.get('checks', '')}",
                          flush=True)
                one, split = results[1][0]["wall"], results[args.workers][0]["wall"]
                print(f"{name:5} {analysis:5} now / before: {one / split:.2f}x faster", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
