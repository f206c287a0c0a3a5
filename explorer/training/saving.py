"""What a training run keeps on disk between steps: the state a checkpoint carries so that a resumed run
continues exactly (optimizer, step, data position, RNG, best dev scores), the room a save needs, and
which checkpoints are kept. The trainer (explorer.training.trainer) decides when; this module says what.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from explorer.model import parameter_count
from explorer.store import run_paths as rp

NO_BEST = {"bleu": -1.0, "step": None, "chrf": None, "chrf_step": None}


def check_room(run_dir: Path, model_cfg) -> None:
    """Room for the next checkpoint (rp.disk_needed), so a save does not fail half-written."""
    need = rp.disk_needed(parameter_count(model_cfg), checkpoints=1)
    free = rp.free_bytes(run_dir)
    if free < need:
        raise OSError(f"disk nearly full: {free >> 20} MiB free in {run_dir}, need {need >> 20} MiB")


def resume_state(step: int, epoch: int, batch_pos: int, optimizer, best: dict, device: torch.device) -> dict:
    """Everything beyond the weights that the next step depends on, for the checkpoint's trainer state."""
    state = {"step": step, "epoch": epoch, "batch_pos": batch_pos,
             "optimizer": optimizer.state_dict(), "rng_cpu": torch.get_rng_state(),
             "best_bleu": float(best["bleu"]), "best_step": best["step"],
             "best_chrf": best["chrf"], "best_chrf_step": best["chrf_step"]}
    if device.type == "cuda":
        state["rng_cuda"] = torch.cuda.get_rng_state()
    return state


def restore_state(state: dict, optimizer, device: torch.device) -> tuple[int, int, int, dict]:
    """resume_state read back: loads the optimizer and the RNGs; returns (step, epoch, batch_pos, best)."""
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_cpu"])
    if device.type == "cuda" and "rng_cuda" in state:
        torch.cuda.set_rng_state(state["rng_cuda"])
    best = {"bleu": state.get("best_bleu", NO_BEST["bleu"]), "step": state.get("best_step"),
            "chrf": state.get("best_chrf"), "chrf_step": state.get("best_chrf_step")}
    return state["step"], state["epoch"], state["batch_pos"], best


def prune_checkpoints(run_dir: Path, keep_last: int, best_step: int | None) -> None:
    """Keep the last `keep_last` checkpoints (all of them when it is 0) and the best by dev BLEU."""
    ckpts = rp.checkpoint_dirs(run_dir)
    for old in ckpts[:-keep_last] if keep_last > 0 else []:
        if rp.step_of(old) != best_step:
            shutil.rmtree(old, ignore_errors=True)
