"""The test-set analyses at OPUS-MT size and on `small`: the head lab and the alignment scorecard, one
process against the split over every core, in the same run.

The models the project opens are OPUS-MT (Marian) models: base size (6+6 layers x 8 heads, d_model
512, d_ff 2048) with a 58,101-piece vocabulary, 144 heads where `small` has 36. Each analysis is
run as its command (`python -m explorer heads|align ...`, a fresh process, loading included) on a
few sentences, first on the path before (`--workers 1`, and for the head lab `--no-reuse`: every
removal decoded step by step) then as the commands run now (split over `--workers N` processes under
torchrun; the head lab checks single-head removals in one pass, explorer.studies.heads.verify), one after the
other per model so load from other processes hits both.
Printed per run: seconds, decodes (head lab) or pairs (scorecard) per second, CPU utilisation
(the processes' CPU time / wall time, in cores), whether its JSON numbers equal the one-process run's
(timings left out), and the time the command's defaults would take (200 sentences, 3 seeds; the
scorecard's 200 pairs, 60 with attributions, 32 integrated-gradients steps, eflomal left out: it
does not grow with the model), projected stage by stage from the stage times the result records.

The base model is random (benchmarks/fixtures.build_base_checkpoint: Marian's options, a 58k
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

from benchmarks.fixtures import build_base_checkpoint
from explorer.files.places import REPO_ROOT
from explorer.studies.heads.job import removal_scoring
from explorer.runtime.clock import TIMING_KEYS
from explorer.runtime.workers import cores

SMALL = REPO_ROOT / "checkpoints" / "bible-es-en"
GOLD = REPO_ROOT / "gold" / "bible-es-en.align"
DEFAULTS = {"heads": {"sentences": 200, "seeds": 3}, "align": {"pairs": 200, "attribution_pairs": 60}}


def build_base(folder: Path) -> Path:
    """A random base-size checkpoint with Marian's options and a 58k vocabulary, with the Bible test pairs."""
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
    singles = 0 if removal_scoring(result) == "loss" else result["cost"]["heads"]
    measured_points = max(1, result["pruning"]["decodes"] - singles - 1)      # the curves' own decodes
    return (stage.get("sentences", 0) + scale * (stage["statistics"] + stage["importance"]
            + stage["single-head removal"]) + scale * stage["pruning"] * (default_decodes - singles - 1) / measured_points)


def project_align(result: dict, pairs: int, attribution_pairs: int) -> float:
    stage = result["stage_seconds"]
    seconds = stage["attention"] * DEFAULTS["align"]["pairs"] / pairs
    for method in ("grad-x-input", "integrated-gradients"):
        seconds += stage.get(method, 0.0) * DEFAULTS["align"]["attribution_pairs"] / max(1, attribution_pairs)
    return seconds


def default_decodes(checkpoint: Path, single_removal: str = "bleu") -> int:
    """Greedy decodes of the set the head lab's defaults make on this model (its cost estimate)."""
    from explorer.studies.heads.job import LabSettings, estimate_cost
    from explorer.store.checkpoint import load_checkpoint

    model = load_checkpoint(str(checkpoint)).model
    settings = LabSettings(single_removal=single_removal)
    return estimate_cost(model, settings, DEFAULTS["heads"]["sentences"]).decodes


def loss_paths(name: str, checkpoint: Path, sentences: int) -> None:
    """The teacher-forced loss of every single-head removal in this process, one thread: encoding the
    sources in every pass (the path before) against the full model's encoder output kept for decoder
    and cross heads (explorer.studies.heads.memo); CPU seconds (process time: waits for a core on a loaded
    machine do not count), in two interleaved rounds, and whether every loss is the same."""
    import torch

    from explorer.studies.common.command import checkpoint_and_held_out
    from explorer.studies.heads.importance import all_heads, teacher_loss
    from explorer.studies.heads.memo import EncoderMemo
    from explorer.studies.common.sentences import build_sentences

    torch.set_num_threads(1)
    ckpt, pairs = checkpoint_and_held_out(str(checkpoint), "cpu")
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, sentences)
    heads = [()] + [[h] for h in all_heads(ckpt.model)]
    seconds, losses = {"before": 0.0, "now": 0.0}, {}
    for _ in range(2):
        for path in ("before", "now"):
            memo = EncoderMemo() if path == "now" else None
            start = time.process_time()
            losses[path] = [teacher_loss(ckpt.model, sents, removed, memo=memo) for removed in heads]
            seconds[path] += time.process_time() - start
    old, new = seconds["before"], seconds["now"]
    print(f"{name:5} teacher-forced losses of {len(heads)} removals x {len(sents)} sentences, 2 rounds: encoded "
          f"each time {old:7.1f} s CPU, encoder output kept {new:7.1f} s CPU, {old / new:.2f}x  same losses: "
          f"{'yes' if losses['before'] == losses['now'] else 'NO'}  (load average {os.getloadavg()[0]:.1f})",
          flush=True)


def approximate_heads(name: str, checkpoint: Path, extra: list[str], workers: int, folder: Path,
                      exact: tuple[dict, dict], projected_decodes: int, sentences: int) -> None:
    """The head lab again with `--single-removal loss` (no removal decoded), after the exact run of the
    same settings: its time against the exact run's, and Spearman's rank correlation between its loss
    rises and the exact run's BLEU drops over the heads (explorer.studies.heads.report.loss_rank_agreement)."""
    from explorer.studies.heads.report import loss_rank_agreement

    out = folder / f"{name}-heads-loss.json"
    timing = run_command(["heads", str(checkpoint), *extra, "--single-removal", "loss", "--workers", str(workers),
                          "--out", str(out)])
    result = json.loads(out.read_text())
    rows = [{"loss_rise": a["loss_rise"], "bleu_drop": e["bleu_drop"]}
            for a, e in zip(result["single_head_removal"], exact[1]["single_head_removal"])]
    rho = loss_rank_agreement(rows)
    projected = project_heads(result, sentences, projected_decodes)
    print(f"{name:5} heads  approximate ({workers} processes, --single-removal loss): {timing['wall']:7.1f} s, "
          f"CPU {timing['cpu']:.1f} s, exact {exact[0]['cpu']:.1f} s CPU: {exact[0]['cpu'] / timing['cpu']:.2f}x less  "
          f"defaults ~{projected / 60:6.1f} min  stages {result['stage_seconds']}  Spearman(loss rise, exact BLEU "
          f"drop) over {len(rows)} heads: {'-' if rho is None else f'{rho:.3f}'}", flush=True)


def profile_removals(checkpoint: Path, sentences: int) -> None:
    """Where a single-head removal's time goes (1 thread, one process, the path before the checks):
    three heads removed, each a greedy decode of the set and a teacher-forced loss, under torch's
    profiler; prints CPU seconds per part and the operators by self CPU time."""
    import torch

    from explorer.studies.common.command import checkpoint_and_held_out
    from explorer.studies.heads.importance import HeadRemover, all_heads, teacher_loss
    from explorer.studies.common.sentences import build_sentences

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


def attribution_paths(name: str, checkpoint: Path, pairs: int, attribution_pairs: int, steps: int) -> None:
    """The scorecard's attribution stage in this process, one thread: its gold pairs (the first `pairs`,
    gradients on the first `attribution_pairs` usable ones, as `python -m explorer align`), each method by
    captum's path (path="captum", the path before) then by the batched one (explorer.studies.common.gradients):
    CPU seconds after a warm-up (process time: waits for a core on a loaded machine do not count), the largest
    difference of the attributions and of integrated gradients' convergence deltas, and whether every
    pair's links are the same under every extraction rule; then the whole scorecard (eflomal left out)
    on either path: CPU seconds and whether its JSON is the same but for timings."""
    import numpy as np
    import torch

    from explorer.studies.align.attribution import ATTRIBUTIONS, piece_attributions
    from explorer.studies.align.gold import read_gold
    from explorer.studies.align.pairs import model_pairs
    from explorer.studies.align.scorecard import extracted
    from explorer.inspection.attention_stats import word_matrix
    from explorer.store.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    model, tokenizer = (ck := load_checkpoint(str(checkpoint))).model, ck.tokenizer
    usable = model_pairs(model, tokenizer, read_gold(GOLD)[:pairs])[0][:attribution_pairs]
    sizes = ", ".join(f"{len(mp.src_ids)}x{len(mp.out_ids)}" for mp in usable)
    print(f"{name}: {len(usable)} pairs (source x target pieces: {sizes}), {steps} integrated-gradients steps, "
          f"1 thread, load average {os.getloadavg()[0]:.1f}", flush=True)
    for method in ATTRIBUTIONS:
        seconds, found = {}, {}
        for path in ("captum", "batched"):                       # warm-up: first calls pay for set-up
            piece_attributions(model, usable[0], method, 2, targets=[0], path=path)
        for path in ("captum", "batched"):
            start = time.process_time()
            found[path] = [piece_attributions(model, mp, method, steps, with_delta=True, path=path) for mp in usable]
            seconds[path] = time.process_time() - start
        pairs_of = list(zip(usable, found["captum"], found["batched"]))
        worst = max(float(np.abs(old[0] - new[0]).max()) for _, old, new in pairs_of)
        delta = max(float(np.abs(old[1] - new[1]).max()) for _, old, new in pairs_of)
        same = all(extracted(word_matrix(old[0], mp.tgt_groups, mp.src_groups), True)
                   == extracted(word_matrix(new[0], mp.tgt_groups, mp.src_groups), True) for mp, old, new in pairs_of)
        old, new = seconds["captum"], seconds["batched"]
        print(f"{name:5} {method:21}: captum {old:8.1f} s CPU  batched {new:8.1f} s CPU  {old / new:5.2f}x  "
              f"max |difference| {worst:.1e}, deltas {delta:.1e}  same links: {'yes' if same else 'NO'}  "
              f"60 pairs ~{old / len(usable):.1f} / {new / len(usable):.1f} CPU-min  "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    from explorer.studies.align.scorecard import AlignSettings, run_scorecard

    settings = AlignSettings(pairs=pairs, attribution_pairs=attribution_pairs, ig_steps=steps, eflomal=False)
    cards = {}
    for path in ("captum", "batched"):
        start = time.process_time()
        cards[path] = numbers(run_scorecard(model, tokenizer, read_gold(GOLD), settings, attribution_path=path))
        cards[path]["cpu"] = time.process_time() - start
    old, new = cards["captum"].pop("cpu"), cards["batched"].pop("cpu")
    print(f"{name:5} whole scorecard ({pairs} pairs, no eflomal): captum {old:.1f} s CPU  batched {new:.1f} s CPU  "
          f"JSON the same (floats within 1e-5): {'yes' if same_json(cards['captum'], cards['batched']) else 'NO'}",
          flush=True)


def same_json(a, b) -> bool:
    """The same JSON, floats within 1e-5 (+1e-4 relative): where float32 sums may round differently."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5 + 1e-4 * abs(b)
    return a == b


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
    parser.add_argument("--loss-paths", action="store_true",
                        help="the head lab's teacher-forced loss of every single-head removal in this process "
                             "(1 thread), encoding every time against the kept encoder output, instead of the commands")
    parser.add_argument("--single-removal", choices=("bleu", "loss"), default="bleu",
                        help="loss: after the head lab's exact runs, run it again with --single-removal loss "
                             "(approximate) and compare its time and its ranking of heads (default bleu: not run)")
    parser.add_argument("--attribution-paths", action="store_true",
                        help="the scorecard's attributions in this process (1 thread), captum's path against the "
                             "batched one, instead of the commands")
    parser.add_argument("--ig-steps", type=int, default=32, help="integrated-gradients steps (default 32)")
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
            if args.loss_paths:
                loss_paths(name, checkpoint, args.sentences)
                continue
            if args.attribution_paths:
                attribution_paths(name, checkpoint, args.pairs, args.attribution_pairs, args.ig_steps)
                continue
            decodes = default_decodes(checkpoint) if "heads" in args.analyses else 0
            for analysis in args.analyses.split(","):
                if analysis == "heads":
                    extra = ["--sentences", str(args.sentences), "--seeds", str(args.seeds)]
                else:
                    extra = ["--gold", str(GOLD), "--pairs", str(args.pairs), "--attribution-pairs",
                             str(args.attribution_pairs), "--no-eflomal"]
                results = {}
                for run, workers in enumerate((1, args.workers)):    # 0: the path before, 1: now
                    out = Path(tmp) / f"{name}-{analysis}-{run}.json"
                    before = ["--no-reuse"] if analysis == "heads" and run == 0 else []
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
                    results[run] = (timing, result)
                    same = "" if run == 0 else ("yes" if numbers(result) == numbers(results[0][1]) else "NO")
                    label = "before" if run == 0 else f"now, {workers} processes"
                    print(f"{name:5} {analysis:5} {label:>14}: {timing['wall']:7.1f} s  {rate:>15}  CPU "
                          f"{timing['cpu'] / timing['wall']:.2f} of {cores()} cores  defaults ~{projected / 60:6.1f} min  "
                          f"same numbers: {same or '-'}  stages {result['stage_seconds']} {result.get('checks', '')}",
                          flush=True)
                one, split = results[0][0]["wall"], results[1][0]["wall"]
                print(f"{name:5} {analysis:5} now / before: {one / split:.2f}x faster", flush=True)
                if analysis == "heads" and args.single_removal == "loss":
                    approximate_heads(name, checkpoint, extra, args.workers, Path(tmp), results[1],
                                      default_decodes(checkpoint, "loss"), args.sentences)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
