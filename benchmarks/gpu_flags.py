"""The GPU check's training rows with the trainer's speed flags, each beside the plain run.

The first GPU call found the base model's bf16 training at 7-12% model FLOPs utilisation (goal 35%) and
named three things to try before any becomes the trainer's default: Adam's fused kernel
(`--fused-adam`), torch.compile (`--compile`) and larger batches (`--batch-tokens`). Each row here is
the plain `train base bf16` row (benchmarks/gpu.py: ours against nn.Transformer on the same batches,
interleaved rounds) with one of them changed, so its tokens/s and MFU read against that row's.

torch.compile runs in a child process with its own time limit: compiling the base model's forward and
backward takes minutes (75 s of warm-up on an H200, 157 s for the whole row run alone; 180 s inside
the check was not enough), and a stage cannot be stopped from inside the process once started, so a
compilation that does not end would take the rest of the call's budget with it. The child prints its row as JSON on its last line. At --tiny the child runs the plain
row, not compiled: even Dynamo's graph capture alone (the "eager" backend) took 90 s for the tiny model
on a CPU core, where the CPU-only dropout's random_() and the loss's nonzero() break the graph and the
batches' shapes recompile it; so CI runs the child, its time limit and its reply, and a GPU the
compilation (torch.compile's default backend, inductor, dynamic shapes).

    python -m benchmarks.gpu_flags '{"device": "cuda", "size": "base", ...}'   (what the check runs)
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Callable

import torch

from benchmarks import gpu_speed as speed

# (stage name, what changes against the plain row); batch_factor multiplies --batch-tokens.
FLAG_ROWS = (
    ("train base bf16 fused adam", {"fused_adam": True}),
    ("train base bf16 2x tokens", {"batch_factor": 2}),
    ("train base bf16 4x tokens", {"batch_factor": 4}),
    ("train base bf16 fused adam 4x tokens", {"fused_adam": True, "batch_factor": 4}),
)
COMPILED = "train base bf16 compiled"
COMPILE_LIMIT = (240.0, 60.0)           # seconds the child may take: (full, --tiny)


def spec(run, size: str, change: dict) -> dict:
    """Everything one row needs, as plain data (a child process reads it from its command line)."""
    factor = change.get("batch_factor", 1)
    return {"device": str(run.device), "size": size, "bf16": True, "tiny": run.tiny,
            "batches": run.pick(12, 3), "batch_tokens": factor * run.pick(run.batch_tokens, 150),
            "rounds": run.pick(4, 2), "steps": run.pick(5, 1),
            "compile": change.get("compile", run.compile) and not run.tiny,
            "fused_adam": change.get("fused_adam", run.fused_adam), "backend": "inductor",
            "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled()}


def train_row(row: dict) -> dict:
    """One training row in this process, as `spec` describes it."""
    device = torch.device(row["device"])
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not row["bf16"]
    try:
        batches = speed.random_batches(row["batches"], row["batch_tokens"], device)
        return speed.compare_training(device, row["size"], row["bf16"], batches, rounds=row["rounds"],
                                      steps=row["steps"], compile_ours=row["compile"], fused_adam=row["fused_adam"],
                                      compile_backend=row["backend"])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def flag_row(size: str, change: dict) -> Callable:
    """A stage: the plain row with `change`, in this process."""
    def stage(run) -> dict:
        result = train_row(spec(run, size, change))
        result["change"] = change
        result["line"] = f"[{', '.join(f'{k} {v}' for k, v in change.items())}] {result['line']}"
        return result
    return stage


def compiled_row(size: str) -> Callable:
    """A stage: the plain row with ours through torch.compile, in a child process with a time limit."""
    def stage(run) -> dict:
        limit = max(10.0, min(run.pick(*COMPILE_LIMIT), run.left() - 5.0))
        row = spec(run, size, {"compile": True})
        command = [sys.executable, "-m", "benchmarks.gpu_flags", json.dumps(row)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return {"ok": False, "change": {"compile": True}, "limit_s": limit,
                    "line": f"train {size} bf16 (ours compiled): did not finish within {limit:.0f} s "
                            f"(compiling and the rounds together)"}
        lines = done.stdout.strip().splitlines()
        try:
            result = json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"ok": False, "change": {"compile": True}, "returncode": done.returncode,
                    "error": done.stderr[-4000:], "line": f"train {size} bf16 (ours compiled): failed: {tail[:200]}"}
        result.update(change={"compile": row["compile"], "backend": row["backend"]}, limit_s=limit)
        if not row["compile"]:
            result["line"] = f"[in a child process, not compiled at --tiny] {result['line']}"
        return result
    return stage


def _child(argv: list[str]) -> int:
    row = json.loads(argv[0])
    if not row["cudnn_attention"]:
        from explorer.runtime.device import training_kernels
        training_kernels(torch.device(row["device"]))
    result = train_row(row)
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
