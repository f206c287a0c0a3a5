"""One prepared GPU check: is the model right on the device, how fast do the analyses run and the model
train and decode there.

    python -m benchmarks gpu [--out bench-results/gpu-check] [--budget 480] [--device auto] [--tiny]

Stages, most important first, each printing one line and adding to one JSON file under --out:
  tests        pytest's `cuda`-marked tests (tests/unit/test_cuda.py; they skip without a GPU)      tests.json
  correctness  capture on == off; incremental decoding == a full forward; beam ids on the device ==
               on the CPU (log-probs within 1e-4); training lowers the loss and bf16 autocast ends
               within 2% of float32 after 50 steps of `small`                                       correctness.json
  analyses     the head lab, the alignment scorecard, contributions with the faithfulness check, the
               lenses, search with exact search, at base size: seconds per sentence on the device,
               and a slice's result equal to the CPU's within stated tolerances (gpu_analyses.py)   analyses.json
  training     tokens/s and model FLOPs utilisation of ours and torch.nn.Transformer on the same
               batches: base bf16 plain, then with Adam's fused kernel, 2x and 4x --batch-tokens,
               and torch.compile (gpu_flags.py); then base fp32, `small` fp32 and bf16 (8k vocabulary) training.json
  decoding     beam 5 with the full BeamTrace against Hugging Face generate on the same OPUS-MT-sized
               weights; sentences/s of the evaluate path                                            decoding.json
and summary.json (the lines, the machine, the goals met or not). Correctness and the analyses' comparisons
run with TF32 off (as PyTorch's default), so the device is compared with the CPU in true float32; the
float32 speed rows turn it on. A stage that would not fit in what is left of --budget is skipped and says
so; a stage that breaks records its error and the next one runs. --tiny: tiny sizes and few sentences, so
the whole check runs on a CPU in under a minute (tests/unit/test_gpu_check.py runs it in CI: it cannot rot).
--out is a new folder, an empty one or this command's own earlier output (gpu_output.py); anything else
is refused before anything runs.
Exit status: 0 when every correctness and analysis comparison that ran passed and at least one ran; 1 when
one failed or none ran (a check that checked nothing is no pass); 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from benchmarks import gpu_analyses as analyses
from benchmarks import gpu_checks as checks
from benchmarks import gpu_flags as flags
from benchmarks import gpu_speed as speed
from benchmarks.gpu_output import DEFAULT_OUT, prepare_out, write_result
from explorer.runtime.device import check_device, resolve_device, training_kernels
from explorer.store.output_dirs import OutputRefused
from explorer.training.args import MAX_BATCH_TOKENS, MIN_BATCH_TOKENS

GOALS = {"train_ratio": 1.2, "train_mfu": 0.35, "decode_ratio": 1.5}   # base bf16 vs nn.Transformer; beam vs HF
GROUPS = ("tests", "correctness", "analyses", "training", "decoding")
CHECKS = ("correctness", "analyses")     # groups whose stages compare results: the check's verdict rests on them
FAILS = ("tests",) + CHECKS              # groups whose failed stage fails the check
MAX_BUDGET = 24 * 3600.0                 # seconds: far above any call, near enough to catch a slip of zeros


@dataclass
class Stage:
    group: str                      # the JSON file it adds to
    name: str
    seconds: tuple[float, float]    # what it is expected to take: (full, --tiny), to skip what cannot fit
    run: Callable[["Run"], dict]


@dataclass
class Run:
    device: torch.device
    tiny: bool
    budget: float
    out: Path
    batch_tokens: int = speed.PAPER_BATCH_TOKENS      # padded tokens a side of a training batch
    compile: bool = False           # training rows: ours through torch.compile
    fused_adam: bool = False        # training rows: Adam's fused kernel for both models
    started: float = field(default_factory=time.perf_counter)
    results: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)    # what several stages use, built by the first (the analyses' model)

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.started)

    def pick(self, full, tiny):
        return tiny if self.tiny else full


def cuda_tests(run: Run) -> dict:
    """pytest -m cuda in a child process (its own CUDA context; a crash there is a failed line here)."""
    command = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider", "tests/unit/test_cuda.py"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=max(30.0, min(150.0, run.left())))
    except subprocess.TimeoutExpired:
        return {"ok": False, "line": "cuda tests: timed out"}
    tail = (done.stdout + done.stderr).strip().splitlines()
    last = tail[-1] if tail else "no output"
    return {"ok": done.returncode == 0, "returncode": done.returncode, "output": "\n".join(tail[-40:]),
            "line": f"cuda tests: {last.strip('= ')}"}


def training_row(size: str, bf16: bool) -> Callable[[Run], dict]:
    def stage(run: Run) -> dict:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not bf16
        try:
            batches = speed.random_batches(run.pick(12, 3), run.pick(run.batch_tokens, 150), run.device)
            return speed.compare_training(run.device, size, bf16, batches, rounds=run.pick(4, 2), steps=run.pick(5, 1),
                                          compile_ours=run.compile, fused_adam=run.fused_adam)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    return stage


def stages(tiny: bool) -> list[Stage]:
    """Every stage, most important first: the device must be right before any figure counts; then the
    analyses at base size and the training flags (what no GPU had measured); then the rows earlier
    calls measured. Names are the same with --tiny (only the sizes shrink)."""
    small, base = ("tiny", "tiny") if tiny else ("small", "base")      # the presets behind the rows' names
    return [
        Stage("tests", "cuda tests", (30, 20), cuda_tests),
        Stage("correctness", "capture", (10, 3), lambda r: checks.capture_matches(r.device, r.pick(16, 2))),
        Stage("correctness", "incremental", (20, 4), lambda r: checks.incremental_matches(r.device, r.pick(16, 2))),
        Stage("correctness", "beam vs cpu", (30, 4), lambda r: checks.beam_matches_cpu(r.device, r.pick(50, 2))),
        Stage("correctness", "bf16 vs fp32", (20, 6),
              lambda r: checks.training_converges(r.device, small, r.pick(50, 4), r.pick(400, 8))),
        *(Stage("analyses", a.stage, seconds, analyses.analysis_stage(a.stage))
          for a, seconds in zip(analyses.ANALYSES, ((90, 6), (40, 5), (60, 5), (20, 3), (60, 4)))),
        Stage("training", "train base bf16", (15, 3), training_row(base, True)),
        *(Stage("training", name, (20, 3), flags.flag_row(base, change)) for name, change in flags.FLAG_ROWS),
        Stage("training", flags.COMPILED, (90, 20), flags.compiled_row(base)),
        Stage("training", "train base fp32", (15, 3), training_row(base, False)),
        Stage("training", "train small fp32", (10, 3), training_row(small, False)),
        Stage("training", "train small bf16", (10, 3), training_row(small, True)),
        Stage("decoding", "beam vs HF", (45, 6),
              lambda r: speed.beam_against_hf(r.device, base, r.pick(58101, 500), r.pick(10, 2), r.pick(25, 6),
                                              r.pick(40, 5), r.pick(3, 1))),
        Stage("decoding", "evaluate path", (15, 4),
              lambda r: speed.batched_throughput(r.device, checks.SHIPPED[r.pick(0, 1)], r.pick(1003, 4), r.pick(128, 4))),
    ]


STAGE_NAMES = tuple(stage.name for stage in stages(tiny=False))


def selected(tiny: bool, only: set[str] | None, names: set[str] | None) -> list[Stage]:
    return [s for s in stages(tiny) if not (only and s.group not in only) and not (names and s.name not in names)]


def machine(device: torch.device) -> dict:
    info = {"torch": torch.__version__, "python": platform.python_version(), "device": str(device),
            "cuda": torch.version.cuda, "threads": torch.get_num_threads(),
            "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}", memory_gib=props.total_memory / 2**30,
                    multiprocessors=props.multi_processor_count, cudnn=torch.backends.cudnn.version(),
                    peak_bf16=speed.peak_flops(device, "bf16"), peak_tf32=speed.peak_flops(device, "fp32"))
    return info


def goals(results: dict, tiny: bool) -> list[str]:
    """The issue's goals, each said met or not, from the rows that ran (nothing said of rows that did not).
    With --tiny the rows are not the goals' sizes, and the lines say so."""
    lines = []
    base = results.get("train base bf16", {})
    if "models" in base:
        ours = base["models"][speed.OURS]
        lines.append(f"goal base bf16 ours / nn.Transformer >= {GOALS['train_ratio']}: {base['ratio']:.2f} "
                     f"({'met' if base['ratio'] >= GOALS['train_ratio'] else 'NOT met'})")
        if ours["mfu"] is not None:
            lines.append(f"goal base bf16 MFU >= {GOALS['train_mfu']:.0%}: {ours['mfu']:.1%} "
                         f"({'met' if ours['mfu'] >= GOALS['train_mfu'] else 'NOT met'})")
    beam = results.get("beam vs HF", {})
    if "ratio_hf_over_traced" in beam:
        ratio = beam["ratio_hf_over_traced"]
        lines.append(f"goal beam 5 with trace >= {GOALS['decode_ratio']}x HF generate: {ratio:.2f}x "
                     f"({'met' if ratio >= GOALS['decode_ratio'] else 'NOT met'})")
    return [line + " [--tiny: not the goal's sizes]" for line in lines] if tiny else lines


def run_all(run: Run, only: set[str] | None = None, names: set[str] | None = None) -> int:
    """Run the selected stages in order; 0 when every comparison that ran passed and one at least ran."""
    by_group: dict[str, dict] = {}
    lines, failed, checked = [], [], []
    for stage in selected(run.tiny, only, names):
        expected = stage.seconds[1 if run.tiny else 0]
        if run.left() < expected:
            result = {"ok": None, "line": f"{stage.name}: skipped, {run.left():.0f} s of the budget left, "
                                          f"about {expected:.0f} s needed"}
        else:
            start = time.perf_counter()
            try:
                result = stage.run(run)
            except Exception as err:           # one broken stage is recorded; the others still run
                result = {"ok": False, "error": traceback.format_exc(limit=8),
                          "line": f"{stage.name}: ERROR {type(err).__name__}: {str(err)[:200]}"}
            result["seconds"] = time.perf_counter() - start
        run.results[stage.name] = result
        by_group.setdefault(stage.group, {})[stage.name] = result
        if result.get("ok") is False and stage.group in FAILS:
            failed.append(stage.name)
        if result.get("ok") is True and stage.group in CHECKS:
            checked.append(stage.name)
        line = f"[{stage.group}] {result['line']} ({result.get('seconds', 0):.1f} s)"
        lines.append(line)
        print(line, flush=True)
        write_result(run.out, f"{stage.group}.json", by_group[stage.group])
    for line in goals(run.results, run.tiny):
        lines.append(line)
        print(line, flush=True)
    total = time.perf_counter() - run.started
    if failed:
        outcome = "FAILED " + ", ".join(failed)
    elif not checked:
        outcome = ("NOTHING CHECKED: no correctness or analysis comparison ran, so nothing says the device's "
                   "results are right")
    else:
        outcome = f"correctness passed ({len(checked)} comparisons)"
    verdict = f"GPU check on {run.device}: {outcome}; {total:.0f} s"
    print(verdict, flush=True)
    write_result(run.out, "summary.json", {"machine": machine(run.device), "tiny": run.tiny, "budget_s": run.budget,
                                           "seconds": total, "lines": lines, "failed": failed, "checked": checked,
                                           "verdict": verdict})
    return 1 if failed or not checked else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"folder for the JSON files: new, empty, or this command's earlier output "
                             f"(default {DEFAULT_OUT})")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an earlier output of this command that was edited since")
    parser.add_argument("--budget", type=_budget, default=480.0,
                        help="seconds (> 0); stages that would not fit are skipped")
    parser.add_argument("--device", default="auto", type=_device, help="cpu, cuda, cuda:N or auto (CUDA if present)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: the whole check in seconds, on a CPU too")
    parser.add_argument("--batch-tokens", type=_batch_tokens, default=speed.PAPER_BATCH_TOKENS,
                        help=f"padded tokens a side of each training batch ({MIN_BATCH_TOKENS:,} to "
                             f"{MAX_BATCH_TOKENS:,}; default the paper's ~25,000)")
    parser.add_argument("--cudnn-attention", action="store_true",
                        help="leave bf16 attention on cuDNN's kernels (the trainer turns them off: explorer.runtime.device)")
    parser.add_argument("--compile", action="store_true", help="training rows: ours through torch.compile (dynamic shapes)")
    parser.add_argument("--fused-adam", action="store_true", help="training rows: Adam's fused kernel, both models")
    parser.add_argument("--stage", action="append", choices=STAGE_NAMES, metavar="NAME",
                        help="run only the stages of this name (repeatable): " + ", ".join(STAGE_NAMES))
    parser.add_argument("--only", action="append", choices=GROUPS, help="run only these groups (repeatable)")
    args = parser.parse_args(argv)
    only, names = set(args.only or ()) or None, set(args.stage or ()) or None
    if not selected(args.tiny, only, names):
        parser.error(f"--only {' '.join(sorted(only or ()))} and --stage {', '.join(sorted(names or ()))} "
                     "select no stage together")
    try:
        out = prepare_out(args.out, args.overwrite)           # before anything is computed
    except OutputRefused as err:
        parser.error(f"--out: {err}")
    device = resolve_device(args.device)
    if not args.cudnn_attention:
        training_kernels(device)                       # what the trainer runs on
    print(json.dumps(machine(device)), flush=True)
    run = Run(device, args.tiny, args.budget, out, args.batch_tokens, args.compile, args.fused_adam)
    return run_all(run, only, names)


def _device(name: str) -> str:
    try:
        return check_device(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_BUDGET):
        raise argparse.ArgumentTypeError(f"seconds above 0 and at most {MAX_BUDGET:.0f} required, not {text}")
    return value


def _batch_tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of tokens required, not {text!r}") from None
    if not MIN_BATCH_TOKENS <= value <= MAX_BATCH_TOKENS:
        raise argparse.ArgumentTypeError(f"{MIN_BATCH_TOKENS:,} to {MAX_BATCH_TOKENS:,} tokens required "
                                         f"(the trainer's bounds), not {value:,}")
    return value
