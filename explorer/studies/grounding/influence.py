"""Which training pairs most raised the probability of an output word: each training pair's gradient
against the word's, over the checkpoint's whole training split (gradients.py makes both).

The score is Grad-Cos, TracIn at the final checkpoint with unit-length gradients (Pruthi et al. 2020,
"Estimating Training Data Influence by Tracing Gradient Descent"; the cosine as in Barshan et al. 2020,
RelatIF): one step of gradient descent on a training pair z changes the word's log-probability by about
lr * g_word . g_z, so a pair whose gradient points the word's way raised it. Unit length keeps a few
long or badly fitted pairs, whose gradients are largest, from heading every list. TracIn sums over the
run's checkpoints; a checkpoint ships alone, so one is used, as dattri's Grad-Cos does.

The training pairs' features are computed once per checkpoint and kept (a GradientStore: N x DIM float16,
unit rows: 29 MB for the Bible's 28,627 pairs, bounded by limits.GRADIENT_BYTES), keyed by the weights'
hash and the dataset, so new weights or another corpus never reuse another's store. A query is one
backward pass and one matrix-vector product.
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
from explorer.data.encoded import encode_pairs
from explorer.files import limits
from explorer.files.user_files import UserFileError, check_regular
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import GRADIENT_STORE_SUFFIX, GROUNDING
from explorer.store.run_paths import runs_root
from explorer.studies.common.context import RunContext
from explorer.studies.grounding import gradients as grads
from explorer.studies.common.words import words
from explorer.text.encoding import source_ids

FORMAT = 1
BATCH_TOKENS = 4096        # padded target positions per backward pass (the Bible's vocabulary: 128 MB of log-probs)


class StoreUnusable(ValueError):
    """A gradient store that cannot be used, with the reason in one line."""


@dataclass(frozen=True)
class GradientStore:
    dataset: str
    weights_sha256: str
    layers: tuple[str, ...]                 # gradients.watched_linears' names, in order
    features: np.ndarray                    # [N, DIM] float16, unit rows, in training-split order

    @property
    def pairs(self) -> int:
        return int(self.features.shape[0])


@dataclass(frozen=True)
class Influence:
    index: int                              # the training pair's place in the training split
    score: float                            # Grad-Cos: > 0 raised the word, < 0 lowered it


def _unit(rows: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(rows.float(), dim=1)                  # [B, DIM]


def build(model, tokenizer, pairs: Sequence, dataset: str, weights_sha256: str,
          context: RunContext = RunContext()) -> GradientStore:
    """Every training pair's unit gradient features, in order; pairs are batched by length."""
    projection = grads.Projection.for_model(model)
    encoded = encode_pairs(tokenizer, pairs, model.cfg.max_len, model.cfg.special)
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded.src[i]), len(encoded.tgt[i])))
    out = np.zeros((len(encoded), grads.DIM), dtype=np.float16)                 # [N, DIM]
    tick = context.ticker().stage("training pairs", len(order))
    pad, done = model.cfg.pad_id, 0
    for rows in _batches(order, [len(t) for t in encoded.tgt]):
        src = pad_batch([encoded.src[i] for i in rows], pad)                   # [B, S]
        tgt = pad_batch([encoded.tgt[i] for i in rows], pad)                   # [B, T+1]
        out[rows] = _unit(grads.features(model, src, tgt, projection=projection)).numpy()
        done += len(rows)
        tick(done)
    return GradientStore(dataset, weights_sha256, projection.layers, out)


def _special(piece: str) -> bool:
    return len(piece) > 2 and piece.startswith("<") and piece.endswith(">")


def _batches(order: list[int], lengths: list[int]) -> list[list[int]]:
    """Consecutive runs of `order` (sorted by length) of at most BATCH_TOKENS padded target positions:
    the batch's log-probabilities ([B, T, V] float32) stay within BATCH_TOKENS x V x 4 bytes."""
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * max(lengths[i], *(lengths[j] for j in batches[-1])) <= BATCH_TOKENS:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def word_positions(pieces: Sequence[str], word: str, occurrence: int = 0) -> list[int]:
    """The output positions of the pieces that spell `word` (compared as grounding's words(), the
    `occurrence`-th time it appears); a piece starting with '▁' starts a word, a special piece (</s>)
    stands alone. [] if it is not there."""
    spans: list[list[int]] = []
    for k, piece in enumerate(pieces):
        if not spans or piece.startswith("▁") or _special(piece) or _special(pieces[k - 1]):
            spans.append([])
        spans[-1].append(k)
    target, seen = words(word), 0
    for span in spans:
        if words("".join(pieces[k] for k in span).replace("▁", " ")) == target:
            if seen == occurrence:                       # the word's own pieces, not a stop after it
                return [k for k in span if any(ch.isalnum() for ch in pieces[k])]
            seen += 1
    return []


def query(model, tokenizer, source: str, out_ids: Sequence[int], positions: Sequence[int]) -> np.ndarray:
    """The unit gradient features [DIM] of the output tokens at `positions` (their summed negative
    log-probability given the source and the output before them)."""
    special = model.cfg.special
    src = torch.tensor([source_ids(tokenizer, source, model.cfg.max_len, special)])          # [1, S]
    tgt = torch.tensor([[special.start] + [int(t) for t in out_ids]])                        # [1, T+1]
    weights = torch.zeros(1, len(out_ids))                                                   # [1, T]
    weights[0, list(positions)] = 1.0
    feats = grads.features(model, src, tgt, weights, projection=grads.Projection.for_model(model))
    return _unit(feats)[0].numpy()                                                           # [DIM]


def top(store: GradientStore, features: np.ndarray, k: int = 20) -> list[Influence]:
    """The k training pairs with the highest Grad-Cos, best first."""
    scores = store.features.astype(np.float32) @ features.astype(np.float32)                # [N]
    best = np.argsort(-scores, kind="stable")[:k]
    return [Influence(int(i), float(scores[i])) for i in best]


def store_path(dataset: str, weights_sha256: str) -> Path:
    """runs/grounding/<dataset hash>-<weights hash>.gradients.safetensors: one per corpus and weights."""
    key = hashlib.sha256(dataset.encode()).hexdigest()[:16]
    return runs_root() / GROUNDING / f"{key}-{str(weights_sha256)[:16]}{GRADIENT_STORE_SUFFIX}"


def save(store: GradientStore, path: Path) -> Path:
    meta = {"format": str(FORMAT), "dataset": store.dataset, "weights_sha256": store.weights_sha256,
            "layers": json.dumps(list(store.layers)), "dim": str(grads.DIM), "k": str(grads.K),
            "seed": str(grads.SEED)}
    write_bytes_atomic(path, save_tensors({"features": store.features}, metadata=meta))
    return Path(path)


def load(path: Path, dataset: str, weights_sha256: str, pairs: int, layers: Sequence[str]) -> GradientStore:
    """A kept store, checked against what it must be (this corpus, these weights, this many training
    pairs, these layers and projections) before its features are read; StoreUnusable (one line) else."""
    name = str(path)
    if not os.path.isfile(path):
        raise StoreUnusable(f"{name}: no gradient store")
    try:                                 # a symlink out of its folder is not followed
        check_regular(path, inside=Path(path).parent)
    except UserFileError as err:
        raise StoreUnusable(str(err)) from None
    expected_bytes = pairs * grads.DIM * 2
    if pairs <= 0 or expected_bytes > limits.GRADIENT_BYTES or os.path.getsize(path) > expected_bytes + (1 << 16):
        raise StoreUnusable(f"{name}: not a gradient store of {pairs:,} pairs within {limits.GRADIENT_BYTES:,} bytes")
    try:
        with safe_open(str(path), framework="np") as handle:
            meta = handle.metadata() or {}
            want = {"format": str(FORMAT), "dataset": dataset, "weights_sha256": weights_sha256,
                    "layers": json.dumps(list(layers)), "dim": str(grads.DIM), "k": str(grads.K),
                    "seed": str(grads.SEED)}
            wrong = [key for key, value in want.items() if meta.get(key) != value]
            if wrong:
                raise StoreUnusable(f"{name}: made for other {', '.join(wrong)} (stale or foreign): build it again")
            if list(handle.keys()) != ["features"] or handle.get_slice("features").get_shape() != [pairs, grads.DIM] \
                    or handle.get_slice("features").get_dtype() != "F16":
                raise StoreUnusable(f"{name}: features must be {pairs:,} x {grads.DIM} float16")
            features = handle.get_tensor("features")
    except StoreUnusable:
        raise
    except Exception as exc:           # safetensors raises its own errors for a damaged header or body
        raise StoreUnusable(f"{name}: damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not np.isfinite(features).all():
        raise StoreUnusable(f"{name}: features hold NaN or infinity")
    return GradientStore(dataset, weights_sha256, tuple(layers), features)
