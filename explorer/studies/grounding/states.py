"""The encoder's view of the training data: how far a sentence's pieces lie from the training pieces'
encoder states (a signal of the verdict), and which training contexts lie nearest one piece (the
"nearest training contexts" of Where did it learn this?).

A piece's state is the encoder's output for it (the last layer; EOS left out), centred and projected on
the first RANK principal directions of the training states (fitted on a sample), at unit length: nearness
is the cosine. What is kept of the training data is a seeded sample of SAMPLE training piece states with
the training pair and position each comes from (float16; the Bible's: SAMPLE x RANK x 2 bytes, 2 MB):
small enough to ship beside a checkpoint, so the verdict needs no pass over the training data on a fresh
machine. A sentence's distance is the mean, over its pieces, of one minus the cosine to the nearest kept
state: a sentence in words and contexts the model was trained on has pieces near training pieces.

Why a sample and not every training state: the Bible's 893,096 source pieces at 64 numbers each are
114 MB; the sample's distances are larger but rank sentences as well (AUROC everyday vs test: every
state 0.973, the sample 0.964, with the surprise 0.981; docs/GROUNDING.md), and the threshold is
calibrated on the same sample.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save as save_tensors

from explorer.data.batching import pad_batch
from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING, STATE_MAP_SUFFIX
from explorer.store.run_paths import runs_root, shipped_root
from explorer.studies.common.context import RunContext
from explorer.text.encoding import source_ids

RANK = 64                  # principal directions kept
SAMPLE = 16_384            # training piece states kept
FIT_ROWS = 100_000         # training piece states the principal directions are fitted on
BATCH_TOKENS = 8192        # padded source positions per encoder pass
SEED = 20261128
FORMAT = 1


class MapUnusable(ValueError):
    """A state map that cannot be used, with the reason in one line."""


@dataclass(frozen=True)
class StateMap:
    dataset: str
    weights_sha256: str
    mean: np.ndarray           # [d] float32: the training states' mean
    basis: np.ndarray          # [d, RANK] float32: their first principal directions
    states: np.ndarray         # [S, RANK] float16, unit rows: the kept training piece states
    pair: np.ndarray           # [S] int32: the training pair each comes from
    position: np.ndarray       # [S] int32: its piece's position in that pair's source
    calibration: dict          # the held-out sentences' signals and the verdict's threshold (verdict.py)

    def project(self, states: np.ndarray) -> np.ndarray:
        """[L, d] encoder states -> [L, RANK] unit vectors in the map's space."""
        z = (states.astype(np.float32) - self.mean) @ self.basis                           # [L, RANK]
        return z / (np.linalg.norm(z, axis=1, keepdims=True) + 1e-12)


def source_states(model, tokenizer, sources: Sequence[str], context: RunContext = RunContext(),
                  stage: str | None = None) -> list[np.ndarray]:
    """Each source's encoder output [L, d] (float32; EOS left out), in order; batches by length."""
    special = model.cfg.special
    ids = [source_ids(tokenizer, s, model.cfg.max_len, special) for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[np.ndarray] = [np.zeros((0, model.cfg.d_model), np.float32)] * len(ids)
    tick = context.ticker().stage(stage, len(order)) if stage else (lambda done: None)
    start = 0
    with torch.inference_mode():
        while start < len(order):
            end = start + 1
            while end < len(order) and (end + 1 - start) * len(ids[order[end]]) <= BATCH_TOKENS:
                end += 1
            rows = order[start:end]
            memory, _ = model.encode(pad_batch([ids[i] for i in rows], model.cfg.pad_id))   # [B, S, d]
            for j, i in enumerate(rows):
                out[i] = memory[j, :max(len(ids[i]) - 1, 0)].float().numpy()                 # [L, d]
            start = end
            tick(start)
    return out


def build(model, tokenizer, train_sources: Sequence[str], dataset: str, weights_sha256: str,
          context: RunContext = RunContext()) -> StateMap:
    """The map of the training sources' states (uncalibrated: verdict.calibrate_states sets the rest)."""
    per_pair = source_states(model, tokenizer, train_sources, context, stage="training sentences")
    pair = np.concatenate([np.full(len(s), i, np.int32) for i, s in enumerate(per_pair)])          # [N]
    position = np.concatenate([np.arange(len(s), dtype=np.int32) for s in per_pair])               # [N]
    every = np.concatenate(per_pair)                                                                # [N, d]
    rng = np.random.default_rng(SEED)
    mean = every.mean(0)                                                                            # [d]
    fit = every[rng.choice(len(every), min(FIT_ROWS, len(every)), replace=False)] - mean            # [F, d]
    rank = min(RANK, fit.shape[1], max(len(fit) - 1, 1))
    _, _, vt = np.linalg.svd(fit, full_matrices=False)                                              # [d, d]
    basis = np.ascontiguousarray(vt[:rank].T, dtype=np.float32)                                     # [d, rank]
    kept = np.sort(rng.choice(len(every), min(SAMPLE, len(every)), replace=False))
    partial = StateMap(dataset, weights_sha256, mean.astype(np.float32), basis, np.zeros((0, rank), np.float16),
                       pair[kept], position[kept], {})
    states = partial.project(every[kept]).astype(np.float16)                                        # [S, rank]
    return StateMap(dataset, weights_sha256, partial.mean, basis, states, pair[kept], position[kept], {})


def nearness(smap: StateMap, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each piece state [L, d]: the cosine to its nearest kept training state [L] and that state's
    row in the map [L]."""
    if not len(states):
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    sims = torch.from_numpy(smap.states.astype(np.float32)) @ torch.from_numpy(smap.project(states)).T   # [S, L]
    best, where = sims.max(0)
    return best.numpy(), where.numpy()


def distance(smap: StateMap, states: np.ndarray) -> float:
    """The sentence's distance: mean over its pieces of 1 - the cosine to the nearest kept training state
    (0 for a sentence with no pieces)."""
    best, _ = nearness(smap, states)
    return float(np.mean(1.0 - best)) if len(best) else 0.0


def nearest(smap: StateMap, state: np.ndarray, k: int = 10) -> list[tuple[int, int, float]]:
    """The k kept training piece states nearest one piece's state [d]: (training pair, position, cosine)."""
    sims = smap.states.astype(np.float32) @ smap.project(state[None])[0]                          # [S]
    best = np.argsort(-sims, kind="stable")[:k]
    return [(int(smap.pair[i]), int(smap.position[i]), float(sims[i])) for i in best]


def _name(dataset: str, weights_sha256: str) -> str:
    return f"{hashlib.sha256(dataset.encode()).hexdigest()[:16]}-{str(weights_sha256)[:16]}{STATE_MAP_SUFFIX}"


def runs_map_path(dataset: str, weights_sha256: str) -> Path:
    return runs_root() / GROUNDING / _name(dataset, weights_sha256)


def shipped_map_path(dataset: str, weights_sha256: str) -> Path:
    return shipped_root() / GROUNDING / _name(dataset, weights_sha256)


def map_path(dataset: str, weights_sha256: str) -> Path:
    """The shipped map of these weights when the repository has one, else runs/grounding/'s."""
    shipped = shipped_map_path(dataset, weights_sha256)
    return shipped if shipped.exists() else runs_map_path(dataset, weights_sha256)


def is_shipped(path: Path) -> bool:
    return Path(path).parent == shipped_root() / GROUNDING


def save(smap: StateMap, path: Path) -> Path:
    meta = {"format": str(FORMAT), "dataset": smap.dataset, "weights_sha256": smap.weights_sha256,
            "calibration": json.dumps(smap.calibration, sort_keys=True)}
    tensors = {k: np.ascontiguousarray(v) for k, v in (("mean", smap.mean), ("basis", smap.basis),
               ("states", smap.states), ("pair", smap.pair), ("position", smap.position))}   # safetensors keeps
    # a transposed view's buffer as it lies in memory, so every array is written in C order
    write_bytes_atomic(path, save_tensors(tensors, metadata=meta))
    return Path(path)


def load(path: Path, dataset: str, weights_sha256: str, d_model: int, pairs: int) -> StateMap:
    """A kept map, checked against what it must be (this corpus, these weights, the model's width, at most
    SAMPLE states from `pairs` training pairs) before its arrays are read; MapUnusable (one line) else."""
    name = str(path)
    if not os.path.isfile(path):
        raise MapUnusable(f"{name}: no state map")
    if os.path.getsize(path) > limits.STATE_MAP_BYTES:
        raise MapUnusable(f"{name}: larger than {limits.STATE_MAP_BYTES:,} bytes")
    try:
        with safe_open(str(path), framework="np") as handle:
            meta = handle.metadata() or {}
            wrong = [k for k, v in (("format", str(FORMAT)), ("dataset", dataset), ("weights_sha256", weights_sha256))
                     if meta.get(k) != v]
            if wrong:
                raise MapUnusable(f"{name}: made for other {', '.join(wrong)} (stale or foreign): build it again")
            shapes = {k: (handle.get_slice(k).get_shape(), handle.get_slice(k).get_dtype()) for k in handle.keys()}
            rank = shapes.get("basis", ([0, 0], ""))[0][-1]
            n = shapes.get("states", ([0], ""))[0][0]
            want = {"mean": ([d_model], "F32"), "basis": ([d_model, rank], "F32"), "states": ([n, rank], "F16"),
                    "pair": ([n], "I32"), "position": ([n], "I32")}
            if shapes != want or not 0 < rank <= d_model or not 0 < n <= SAMPLE:
                raise MapUnusable(f"{name}: arrays are not those of a state map for width {d_model}")
            arrays = {k: handle.get_tensor(k) for k in want}
            calibration = json.loads(meta.get("calibration", "{}"))
    except MapUnusable:
        raise
    except Exception as exc:            # safetensors' and json's own errors for a damaged file
        raise MapUnusable(f"{name}: damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not all(np.isfinite(arrays[k]).all() for k in ("mean", "basis", "states")) or not isinstance(calibration, dict):
        raise MapUnusable(f"{name}: holds NaN, infinity or a malformed calibration")
    if (arrays["pair"] < 0).any() or (arrays["pair"] >= pairs).any() or (arrays["position"] < 0).any():
        raise MapUnusable(f"{name}: names training pairs outside the {pairs:,} of its split")
    return StateMap(dataset, weights_sha256, arrays["mean"], arrays["basis"], arrays["states"], arrays["pair"],
                    arrays["position"], calibration)
