"""The model's view of the training data: how far a sentence's pieces lie from the training pieces'
encoder states (a signal of the verdict), and which training contexts lie nearest one piece (the
"nearest training contexts" of Where did it learn this?): a source word's in the encoder's states, an
output word's in the decoder's.

A piece's state is the model's last hidden state for it: on the source side the encoder's output (EOS
left out), on the output side the decoder's output where it writes the piece (teacher-forced on the
pair's target; EOS left out), the state the next-word distribution is read from. Each is centred and
projected on the first RANK principal directions of the training states (fitted on a sample), at unit
length: nearness is the cosine. What is kept of the training data is a seeded sample of SAMPLE training
piece states with the training pair and position each comes from (float16; the Bible's: SAMPLE x RANK x
2 bytes, 2 MB): small enough to ship beside a checkpoint, so the verdict needs no pass over the training
data on a fresh machine. A sentence's distance is the mean, over its pieces, of one minus the cosine to
the nearest kept state: a sentence in words and contexts the model was trained on has pieces near
training pieces. The verdict uses the source side only (the output side depends on what was written).

Why a sample and not every training state: the Bible's 893,096 source pieces at 64 numbers each are
114 MB; the sample's distances are larger but rank sentences as well (AUROC everyday vs test: every
state 0.973, the sample 0.964, with the surprise 0.981; docs/GROUNDING.md), and the threshold is
calibrated on the same sample. Building holds only the rows the sample and the fit draw (chosen before
the pass, from the pieces' count), never every state: at most (FIT_ROWS + SAMPLE) x d float32, 119 MB
at d = 256.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save as save_tensors

from explorer.data.batching import pad_batch
from explorer.files import limits
from explorer.files.user_files import UserFileError, check_regular
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GROUNDING, STATE_MAP_SUFFIX
from explorer.store.run_paths import runs_root, shipped_root
from explorer.studies.common.context import RunContext
from explorer.text.encoding import decoder_inputs, output_ids, source_ids

RANK = 64                  # principal directions kept
SAMPLE = 16_384            # training piece states kept
FIT_ROWS = 100_000         # training piece states the principal directions are fitted on
BATCH_TOKENS = 8192        # padded positions per pass
SEED = 20261128
FORMAT = 1
SIDES = ("source", "output")


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
    position: np.ndarray       # [S] int32: its piece's position in that pair's source (or output) pieces
    calibration: dict          # the held-out sentences' signals and the verdict's threshold (verdict.py)
    side: str = "source"       # whose states: the encoder's ("source") or the decoder's ("output")

    def project(self, states: np.ndarray) -> np.ndarray:
        """[L, d] hidden states -> [L, RANK] unit vectors in the map's space."""
        z = (states.astype(np.float32) - self.mean) @ self.basis                           # [L, RANK]
        return z / (np.linalg.norm(z, axis=1, keepdims=True) + 1e-12)


class _Pass:
    """One side's states of many sentences, batch by batch in length order; how many each sentence has is
    known before the pass (from its pieces), so a build can choose its sample first."""

    def __init__(self, model, tokenizer, sources: Sequence[str], outputs: Sequence[Sequence[int]] | None):
        special, max_len = model.cfg.special, model.cfg.max_len
        self.model, self.special = model, special
        self.src = [source_ids(tokenizer, s, max_len, special) for s in sources]
        self.out = None if outputs is None else [[int(t) for t in o] for o in outputs]
        if self.out is None:                    # the encoder's output of every piece but EOS
            self.lengths = [max(len(ids) - 1, 0) for ids in self.src]
        else:                                   # the decoder's output where it writes each piece but EOS
            self.lengths = [sum(t != special.eos for t in o) for o in self.out]
        self.order = sorted(range(len(self.src)), key=lambda i: len(self.src[i]) + len(self.out[i] if self.out else []))

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        """(sentence, its states [L, d] float32), in length order."""
        model, pad, start = self.model, self.model.cfg.pad_id, 0
        size = (lambda i: len(self.src[i]) + len(self.out[i])) if self.out else (lambda i: len(self.src[i]))
        with torch.inference_mode():
            while start < len(self.order):
                end = start + 1
                while end < len(self.order) and (end + 1 - start) * size(self.order[end]) <= BATCH_TOKENS:
                    end += 1
                rows = self.order[start:end]
                memory, src_mask = model.encode(pad_batch([self.src[i] for i in rows], pad))      # [B, S, d]
                if self.out is None:
                    hidden = memory
                else:
                    tgt_in = pad_batch([decoder_inputs(self.out[i], self.special) for i in rows], pad)  # [B, T]
                    hidden = model.decode(tgt_in, memory, src_mask)                                 # [B, T, d]
                for j, i in enumerate(rows):
                    if self.out is None:
                        yield i, hidden[j, :self.lengths[i]].float().numpy()                       # [L, d]
                    else:
                        keep = torch.tensor([t != self.special.eos for t in self.out[i]], dtype=torch.bool)
                        yield i, hidden[j, :len(self.out[i])][keep].float().numpy()                # [L, d]
                start = end


def _states(model, tokenizer, sources, outputs, context: RunContext, stage: str | None) -> list[np.ndarray]:
    run = _Pass(model, tokenizer, sources, outputs)
    tick = context.ticker().stage(stage, len(run.src)) if stage else (lambda done: None)
    out: list[np.ndarray] = [np.zeros((0, model.cfg.d_model), np.float32)] * len(run.src)
    for done, (i, states) in enumerate(run, 1):
        out[i] = states
        tick(done)
    return out


def source_states(model, tokenizer, sources: Sequence[str], context: RunContext = RunContext(),
                  stage: str | None = None) -> list[np.ndarray]:
    """Each source's encoder output [L, d] (float32; EOS left out), in order; batches by length."""
    return _states(model, tokenizer, sources, None, context, stage)


def output_states(model, tokenizer, sources: Sequence[str], outputs: Sequence[Sequence[int]],
                  context: RunContext = RunContext(), stage: str | None = None) -> list[np.ndarray]:
    """Each output's decoder states [T, d] (float32), one per output piece but EOS (the state that wrote it,
    teacher-forced on `outputs`: target piece ids ending in EOS), in order; batches by length."""
    return _states(model, tokenizer, sources, outputs, context, stage)


def training_outputs(model, tokenizer, targets: Sequence[str]) -> list[list[int]]:
    """The training targets' pieces as the trainer writes them (the decoder's outputs, EOS last)."""
    return [output_ids(tokenizer, t, model.cfg.max_len - 1, model.cfg.special) for t in targets]


def build(model, tokenizer, train_sources: Sequence[str], dataset: str, weights_sha256: str,
          context: RunContext = RunContext(), train_outputs: Sequence[Sequence[int]] | None = None) -> StateMap:
    """The map of the training sources' encoder states, or with `train_outputs` (training_outputs) of the
    decoder's states where it writes them (uncalibrated: verdict.calibrate_states sets the rest)."""
    run = _Pass(model, tokenizer, train_sources, train_outputs)
    lengths = np.array(run.lengths, dtype=np.int64)                                                  # [P]
    first = np.concatenate([[0], np.cumsum(lengths)])                                                # [P + 1]
    total = int(first[-1])
    rng = np.random.default_rng(SEED)
    fit_rows = np.sort(rng.choice(total, min(FIT_ROWS, total), replace=False))                      # [F]
    kept = np.sort(rng.choice(total, min(SAMPLE, total), replace=False))                           # [S]
    d = model.cfg.d_model
    fit, sample, summed = np.zeros((len(fit_rows), d), np.float32), np.zeros((len(kept), d), np.float32), np.zeros(d)
    tick = context.ticker().stage("training sentences", len(run.src))
    for done, (i, states) in enumerate(run, 1):
        lo, hi = first[i], first[i + 1]                                          # this sentence's global rows
        summed += states.sum(0, dtype=np.float64)
        for rows, into in ((fit_rows, fit), (kept, sample)):
            a, b = np.searchsorted(rows, [lo, hi])
            into[a:b] = states[rows[a:b] - lo]
        tick(done)
    mean = (summed / max(total, 1)).astype(np.float32)                                               # [d]
    rank = min(RANK, d, max(len(fit) - 1, 1))
    _, _, vt = np.linalg.svd(fit - mean, full_matrices=False)                                        # [d, d]
    basis = np.ascontiguousarray(vt[:rank].T, dtype=np.float32)                                      # [d, rank]
    pair = (np.searchsorted(first, kept, side="right") - 1).astype(np.int32)                         # [S]
    position = (kept - first[pair]).astype(np.int32)                                                 # [S]
    side = "source" if train_outputs is None else "output"
    partial = StateMap(dataset, weights_sha256, mean, basis, np.zeros((0, rank), np.float16), pair, position, {}, side)
    states = partial.project(sample).astype(np.float16)                                              # [S, rank]
    return StateMap(dataset, weights_sha256, mean, basis, states, pair, position, {}, side)


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


def _name(dataset: str, weights_sha256: str, side: str) -> str:
    tag = "" if side == "source" else f".{side}"
    return f"{hashlib.sha256(dataset.encode()).hexdigest()[:16]}-{str(weights_sha256)[:16]}{tag}{STATE_MAP_SUFFIX}"


def runs_map_path(dataset: str, weights_sha256: str, side: str = "source") -> Path:
    return runs_root() / GROUNDING / _name(dataset, weights_sha256, side)


def shipped_map_path(dataset: str, weights_sha256: str, side: str = "source") -> Path:
    return shipped_root() / GROUNDING / _name(dataset, weights_sha256, side)


def map_path(dataset: str, weights_sha256: str, side: str = "source") -> Path:
    """The shipped map of these weights when the repository has one, else runs/grounding/'s."""
    shipped = shipped_map_path(dataset, weights_sha256, side)
    return shipped if shipped.exists() else runs_map_path(dataset, weights_sha256, side)


def is_shipped(path: Path) -> bool:
    return Path(path).parent == shipped_root() / GROUNDING


def save(smap: StateMap, path: Path) -> Path:
    meta = {"format": str(FORMAT), "dataset": smap.dataset, "weights_sha256": smap.weights_sha256, "side": smap.side,
            "calibration": json.dumps(smap.calibration, sort_keys=True)}
    tensors = {k: np.ascontiguousarray(v) for k, v in (("mean", smap.mean), ("basis", smap.basis),
               ("states", smap.states), ("pair", smap.pair), ("position", smap.position))}   # safetensors keeps
    # a transposed view's buffer as it lies in memory, so every array is written in C order
    write_bytes_atomic(path, save_tensors(tensors, metadata=meta))
    return Path(path)


CALIBRATED = ("score_mean", "score_std", "distance_mean", "distance_std", "threshold")   # what the verdict reads


def _calibration_ok(calibration) -> bool:
    """A map's calibration: none yet ({}, an output map's), or every number the verdict combines, finite, with
    spreads above 0 (a map edited by hand once raised KeyError and ZeroDivisionError in the verdict)."""
    if not isinstance(calibration, dict):
        return False
    if "threshold" not in calibration:
        return True
    values = [calibration.get(k) for k in CALIBRATED]
    try:                                 # float(10**400): OverflowError; np.isfinite of it: TypeError
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
                      for v in values)
    except OverflowError:
        return False
    return numbers and calibration["score_std"] > 0 and calibration["distance_std"] > 0


def load(path: Path, dataset: str, weights_sha256: str, d_model: int, pairs: int, side: str = "source") -> StateMap:
    """A kept map, checked against what it must be (this corpus, these weights, this side, the model's width,
    at most SAMPLE states from `pairs` training pairs) before its arrays are read; MapUnusable (one line) else.
    A map that names no side is a source map (the first ones shipped so)."""
    name = str(path)
    if not os.path.isfile(path):
        raise MapUnusable(f"{name}: a directory or other non-file, not a state map" if os.path.lexists(path)
                          else f"{name}: no state map")
    try:                                 # a symlink out of its folder is not followed
        check_regular(path, inside=Path(path).parent)
    except UserFileError as err:
        raise MapUnusable(str(err)) from None
    if os.path.getsize(path) > limits.STATE_MAP_BYTES:
        raise MapUnusable(f"{name}: larger than {limits.STATE_MAP_BYTES:,} bytes")
    try:
        with safe_open(str(path), framework="np") as handle:
            meta = handle.metadata() or {}
            meta.setdefault("side", "source")
            wrong = [k for k, v in (("format", str(FORMAT)), ("dataset", dataset), ("weights_sha256", weights_sha256),
                                    ("side", side)) if meta.get(k) != v]
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
    if not all(np.isfinite(arrays[k]).all() for k in ("mean", "basis", "states")) or not _calibration_ok(calibration):
        raise MapUnusable(f"{name}: holds NaN, infinity or a malformed calibration")
    if (arrays["pair"] < 0).any() or (arrays["pair"] >= pairs).any() or (arrays["position"] < 0).any():
        raise MapUnusable(f"{name}: names training pairs outside the {pairs:,} of its split")
    return StateMap(dataset, weights_sha256, arrays["mean"], arrays["basis"], arrays["states"], arrays["pair"],
                    arrays["position"], calibration, side)
