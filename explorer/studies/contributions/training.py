"""The source share over training: the mean ALTI+ source share at each checkpoint of a checkpoint's run.

The run is found as the Contributions page finds it (explorer.evaluation.comparison.runs_of over the
checkpoints beside this one: a run folder's step_N checkpoints, or shipped checkpoints whose config.json
names the same run, e.g. bible-es-en-epoch1 beside bible-es-en). Each checkpoint is forced on the same
held-out pairs, this checkpoint's (the first N with a reference), so the points differ only in the
weights. Each point is explorer.studies.contributions.job's summary: the mean over every output token, the mean
of sentence means and the percentiles.
"""
from __future__ import annotations

import time
from pathlib import Path

from explorer.studies.contributions.job import ContributionSettings, run_contributions
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study


def run_checkpoints(path: str | Path) -> list:
    """The checkpoints of `path`'s run beside it, by step (itself alone when it has no run)."""
    from explorer.evaluation.comparison import runs_of
    from explorer.store.catalog import list_checkpoints

    here = Path(path).resolve()
    for group in runs_of(list_checkpoints(here.parent)):
        if any(Path(str(i.path)).resolve() == here for i in group.checkpoints):
            return list(zip(group.checkpoints, group.steps))
    return []


def run_over_training(model, tokenizer, pairs, sentences: int, *, path: str | Path = "",
                      context: RunContext = RunContext()) -> dict:
    """{"checkpoints": [{name, step, summary...}]} over the run of the checkpoint at `path` (its own
    model and tokenizer are used for itself; the others are loaded). Raises Cancelled."""
    from explorer.store.checkpoint import load_checkpoint

    meta, t0 = context.meta, time.time()
    pairs = [p for p in pairs if p.tgt.strip()][:sentences]
    if not pairs:
        raise ValueError("no held-out pair has a reference")
    here = Path(path).resolve()
    members = run_checkpoints(path) or [(None, (meta.get("training") or {}).get("step"))]   # alone: one point
    ticker = context.ticker()
    tick = ticker.stage("checkpoints", len(members))
    points = []
    for k, (info, step) in enumerate(members):
        own = info is None or Path(str(info.path)).resolve() == here
        ckpt = None if own else load_checkpoint(str(info.path), device=str(next(model.parameters()).device))
        result = run_contributions(model if own else ckpt.model, tokenizer if own else ckpt.tokenizer, pairs,
                                   ContributionSettings(sentences=len(pairs)),
                                   context=RunContext(cancel=context.cancel))
        name = meta.get("name", "") if info is None else info.name
        points.append({"name": name, "step": step, "this_checkpoint": own, **result["summary"]})
        context.say(f"{name} (step {step}): mean source share {result['summary']['mean_source_share']:.3f}")
        ticker.check(tick, k + 1)
    return {"settings": {**context.checkpoint(), "check": "over-training", "sentences": len(pairs), "forced": "reference"},
            "checkpoints": points, "seconds": round(time.time() - t0, 1)}


def report(result: dict) -> str:
    lines = [f"ALTI+ mean source share over training ({result['settings']['sentences']} held-out pairs, forced "
             "on their references)", f"{'checkpoint':<28}{'step':>8}{'mean':>8}{'p5':>8}{'p50':>8}"]
    for p in result["checkpoints"]:
        lines.append(f"{p['name']:<28}{str(p['step']):>8}{p['mean_source_share']:>8.3f}"
                     f"{p['percentiles']['5']:>8.3f}{p['percentiles']['50']:>8.3f}")
    if len(result["checkpoints"]) < 2:
        lines.append("(no other checkpoint of this run beside it: no curve)")
    return "\n".join(lines)


OVER_TRAINING = Study("contributions", run_over_training, ("settings", "checkpoints"), report, ("checkpoints",))
