"""Where each feature of a dictionary fires in the checkpoint's own training pairs: its top contexts, how
often it fires (its density) and how strongly (a histogram), so that a feature's page opens at once.

Built once per dictionary, after it is trained: `sentences` training pairs drawn in a seeded order, every
position of them passed through the model (encoder sites: the source pieces; decoder sites: the target
positions the decoder reads, the start id first), what the site reads (the FFN input, or the stream)
encoded by the dictionary. Kept per feature: its `top` strongest activations with (pair, position), how
many positions it fired on, its largest value and a histogram of its non-zero values in BINS equal bins
from 0 to that value.

On disk beside the dictionary (names.FEATURE_CONTEXTS, safetensors), with the hash of the dictionary's
weights file it was built from: a dictionary trained again makes its old contexts unusable, never wrong.
Sizes are checked against the dictionary before a tensor is read; the file is bounded by
limits.CONTEXTS_BYTES.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors.numpy import save as save_tensors

from explorer.config.checks import MODEL_LIMITS
from explorer.data.encoded import encode_pairs
from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import FEATURE_CONTEXTS, SAE_WEIGHTS
from explorer.files.user_files import UserFileError, open_regular
from explorer.studies.features.files import DictionaryUnusable, read_safetensors
from explorer.studies.features.sites import every_row

TOP = 20                  # contexts kept per feature (a feature's page shows them all)
BINS = 20                 # histogram bins per feature
SENTENCES = 2_000         # training pairs read (bible-es-en: about 70,000 source positions)
CHUNK = 4_096             # rows encoded at once
FORMAT = 1
DTYPES = {"pairs": "int64", "top_pair": "int32", "top_position": "int32", "top_value": "float32",
          "active": "int64", "max_value": "float32", "hist": "int64"}        # as build() makes them


@dataclass(frozen=True)
class ContextIndex:
    site: str
    pairs: np.ndarray             # [n] the training pairs read (places in the training split), in order
    tokens: int                   # positions read
    top_pair: np.ndarray          # [m, TOP] int32: the pair of each top context (-1: fewer contexts)
    top_position: np.ndarray      # [m, TOP] int32: its position
    top_value: np.ndarray         # [m, TOP] float32: the activation there, strongest first
    active: np.ndarray            # [m] int64: positions where the feature fired
    max_value: np.ndarray         # [m] float32: its largest activation (0: never fired)
    hist: np.ndarray              # [m, BINS] int64: its non-zero activations in BINS bins of [0, max_value]

    def density(self, feature: int) -> float:
        return float(self.active[feature]) / max(self.tokens, 1)

    def contexts(self, feature: int) -> list[tuple[int, int, float]]:
        """(pair, position, activation) of the feature's top contexts, strongest first."""
        return [(int(p), int(q), float(v)) for p, q, v in
                zip(self.top_pair[feature], self.top_position[feature], self.top_value[feature]) if p >= 0]

    def edges(self, feature: int) -> np.ndarray:
        return np.linspace(0.0, float(self.max_value[feature]), BINS + 1)


def _rows(model, tokenizer, pairs: Sequence, chosen: np.ndarray, site: str):
    encoded = encode_pairs(tokenizer, [pairs[int(i)] for i in chosen], model.cfg.max_len, model.cfg.special)
    src, tgt_in = encoded.src, [t[:-1] for t in encoded.tgt]
    lengths = [len(s) for s in src] if site.startswith("encoder.") else [len(t) for t in tgt_in]
    return every_row(model, src, tgt_in, site).inputs, np.asarray(lengths, dtype=np.int64)


@torch.no_grad()
def build(model, tokenizer, pairs: Sequence, site: str, tc, sentences: int = SENTENCES, seed: int = 0,
          top: int = TOP) -> ContextIndex:
    """The index of `tc` (the dictionary of `site`) over `sentences` of the training `pairs`."""
    chosen = np.sort(np.random.default_rng(seed).permutation(len(pairs))[:sentences])
    inputs, lengths = _rows(model, tokenizer, pairs, chosen, site)                      # [N, d], [n]
    feats, rows, values = [], [], []
    for first in range(0, len(inputs), CHUNK):
        x = torch.from_numpy(inputs[first:first + CHUNK])                                  # [c, d]
        got, index = (x @ tc.W_enc + tc.b_enc).topk(tc.k, dim=-1)                           # [c, k]
        fired = got > 0
        feats.append(index[fired].numpy())
        rows.append((torch.arange(len(x))[:, None].expand_as(index)[fired] + first).numpy())
        values.append(got[fired].numpy())
    feat, row, value = np.concatenate(feats), np.concatenate(rows), np.concatenate(values).astype(np.float32)
    m = tc.width
    order = np.lexsort((-value, feat))                                       # by feature, strongest first
    feat, row, value = feat[order], row[order], value[order]
    starts = np.searchsorted(feat, np.arange(m + 1))
    active = np.diff(starts).astype(np.int64)                                             # [m]
    top_rows = np.full((m, top), -1, dtype=np.int64)
    top_value = np.zeros((m, top), dtype=np.float32)
    max_value = np.zeros(m, dtype=np.float32)
    for f in np.flatnonzero(active):
        a, b = starts[f], min(starts[f + 1], starts[f] + top)
        top_rows[f, :b - a], top_value[f, :b - a] = row[a:b], value[a:b]
        max_value[f] = value[a]
    scale = np.where(max_value > 0, max_value, 1.0)[feat]
    bins = np.minimum((value / scale * BINS).astype(np.int64), BINS - 1)
    hist = np.zeros((m, BINS), dtype=np.int64)
    np.add.at(hist, (feat, bins), 1)
    first_row = np.concatenate([[0], np.cumsum(lengths)])
    sentence = np.searchsorted(first_row, np.maximum(top_rows, 0), side="right") - 1     # [m, top]
    top_pair = np.where(top_rows >= 0, chosen[sentence], -1).astype(np.int32)
    top_position = np.where(top_rows >= 0, top_rows - first_row[sentence], -1).astype(np.int32)
    return ContextIndex(site, chosen.astype(np.int64), int(lengths.sum()), top_pair, top_position, top_value,
                        active, max_value, hist)


def weights_hash(dictionary_folder: Path) -> str:
    """The sha256 of the dictionary's weights file, read as a regular file inside its folder (a FIFO there
    would wait for a writer forever); UserFileError else."""
    folder = Path(dictionary_folder)
    digest = hashlib.sha256()
    with open(open_regular(folder / SAE_WEIGHTS, inside=folder), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save(index: ContextIndex, dictionary_folder: Path) -> Path:
    """Beside the dictionary it was built from (whose weights file must be there)."""
    folder = Path(dictionary_folder)
    meta = {"format": str(FORMAT), "site": index.site, "tokens": str(index.tokens),
            "dictionary_sha256": weights_hash(folder)}
    tensors = {name: np.ascontiguousarray(getattr(index, name)) for name in
               ("pairs", "top_pair", "top_position", "top_value", "active", "max_value", "hist")}
    path = folder / FEATURE_CONTEXTS
    write_bytes_atomic(path, save_tensors(tensors, metadata=meta))
    return path


def load(dictionary_folder: Path, *, site: str, width: int, n_pairs: int) -> ContextIndex:
    """The contexts kept beside this dictionary, if they were built from its present weights for `site`, with
    `width` features, over pairs of a split of `n_pairs`; DictionaryUnusable (one line) else."""
    folder = Path(dictionary_folder)
    path = folder / FEATURE_CONTEXTS
    meta, arrays, _ = read_safetensors(path, folder, limits.CONTEXTS_BYTES)
    if meta.get("format") != str(FORMAT) or meta.get("site") != site:
        raise DictionaryUnusable(f"{path}: not the contexts of {site}")
    try:
        built_from = weights_hash(folder)
    except (UserFileError, OSError) as err:
        raise DictionaryUnusable(f"{path}: its dictionary's weights cannot be read ({err})") from None
    if meta.get("dictionary_sha256") != built_from:
        raise DictionaryUnusable(f"{path}: built from other weights of this dictionary: build it again")
    shapes = {name: list(arrays[name].shape) for name in sorted(arrays)}
    n = shapes.get("pairs", [0])[0] if len(shapes.get("pairs", [])) == 1 else 0
    want = {"pairs": [n], "top_pair": [width, TOP], "top_position": [width, TOP], "top_value": [width, TOP],
            "active": [width], "max_value": [width], "hist": [width, BINS]}
    if shapes != want or not 0 < n <= n_pairs:
        raise DictionaryUnusable(f"{path}: tensors {shapes}, not those of {width} features")
    odd = {name: str(a.dtype) for name, a in arrays.items() if str(a.dtype) != DTYPES[name]}
    if odd:
        raise DictionaryUnusable(f"{path}: tensors of the wrong type {odd}: build it again")
    tokens = limits.whole_number(meta.get("tokens", ""))
    pair, position = arrays["top_pair"], arrays["top_position"]
    ok = (tokens is not None and (arrays["pairs"] >= 0).all() and (arrays["pairs"] < n_pairs).all()
          and (pair >= -1).all() and (pair < n_pairs).all() and ((pair < 0) == (position < 0)).all()
          and (position >= -1).all() and (position < MODEL_LIMITS["max_len"]).all()
          and np.isfinite(arrays["top_value"]).all() and np.isfinite(arrays["max_value"]).all()
          and (arrays["max_value"] >= 0).all() and (arrays["active"] >= 0).all()
          and (arrays["active"] <= tokens).all() and (arrays["hist"] >= 0).all())
    if not ok:                           # a page read them as shares (over 100%), places (a wrong context), a range
        raise DictionaryUnusable(f"{path}: values out of range")
    return ContextIndex(site, arrays["pairs"], tokens, arrays["top_pair"], arrays["top_position"],
                        arrays["top_value"], arrays["active"], arrays["max_value"], arrays["hist"])

