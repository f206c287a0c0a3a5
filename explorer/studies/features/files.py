"""A transcoder on disk, in SAELens's format: a folder with cfg.json and sae_weights.safetensors, so that
other tools read our dictionaries (a test loads one with SAELens and compares its encodings).

SAELens 6.54 has skip transcoders with ReLU and JumpReLU latents but no TopK one, so cfg.json names the
architecture "topk_skip_transcoder" with its `k`; SAELens reads it once that name is registered with its
SkipTranscoder whose activation is its own TopK (tests/unit/test_features.py shows how). The metadata says
which checkpoint (weights hash), which site and whether it is the random baseline; load() checks them
against the model it is asked for before it reads a tensor, and every shape against cfg.json.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save as save_tensors

from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import SAE_CFG, SAE_WEIGHTS
from explorer.files.user_files import UserFileError, read_user_file
from explorer.studies.features.transcoder import TopKTranscoder

CFG, WEIGHTS = SAE_CFG, SAE_WEIGHTS
ARCHITECTURE = "topk_skip_transcoder"
SAELENS_VERSION = "6.54.12"          # the format's version as SAELens writes it


class DictionaryUnusable(ValueError):
    """A dictionary folder that cannot be used here; the message says why in one line."""


def save(tc: TopKTranscoder, folder: Path, *, site: str, weights_sha256: str, model_name: str,
         random_decoder: bool = False) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    d_in, width = tc.W_enc.shape
    cfg = {"architecture": ARCHITECTURE, "d_in": int(d_in), "d_sae": int(width), "d_out": int(tc.W_dec.shape[1]),
           "k": tc.k, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": False,
           "normalize_activations": "none", "reshape_activations": "none",
           "metadata": {"sae_lens_version": SAELENS_VERSION, "model_name": model_name, "hook_name": f"{site}.in",
                        "hook_name_out": f"{site}.out", "site": site, "weights_sha256": weights_sha256,
                        "random_decoder": bool(random_decoder)}}
    tensors = {name: np.ascontiguousarray(getattr(tc, name).detach().float().numpy())
               for name in ("W_enc", "b_enc", "W_dec", "W_skip", "b_dec")}
    write_bytes_atomic(folder / WEIGHTS, save_tensors(tensors))          # the weights first, the cfg last:
    write_bytes_atomic(folder / CFG, json.dumps(cfg, indent=1).encode())  # a folder with a cfg is whole
    return folder


def load(folder: Path, *, site: str, weights_sha256: str, d_model: int) -> TopKTranscoder:
    """The transcoder in `folder`, if it was made for this site of these weights; DictionaryUnusable else."""
    folder = Path(folder)
    try:
        cfg = json.loads(read_user_file(folder / CFG, limits.JSON_BYTES, inside=folder))
    except (UserFileError, ValueError) as err:
        raise DictionaryUnusable(f"{folder}: no readable {CFG} ({err})") from None
    meta = cfg.get("metadata") if isinstance(cfg, dict) else None
    if not isinstance(meta, dict) or cfg.get("architecture") != ARCHITECTURE:
        raise DictionaryUnusable(f"{folder}: not a TopK transcoder of this project")
    wrong = [k for k, v in (("site", site), ("weights_sha256", weights_sha256)) if meta.get(k) != v]
    if wrong:
        raise DictionaryUnusable(f"{folder}: made for another {' and '.join(wrong)} (stale or foreign): train it again")
    sizes = [cfg.get(k) for k in ("d_in", "d_sae", "d_out", "k")]
    if not all(isinstance(v, int) and v > 0 for v in sizes) or sizes[0] != d_model or sizes[2] != d_model \
            or sizes[3] > sizes[1] or (sizes[0] * sizes[1] * 2 + sizes[0] * sizes[2]) * 4 > limits.DICTIONARY_BYTES:
        raise DictionaryUnusable(f"{folder}: sizes {sizes} do not fit a model of width {d_model}")
    d_in, width, d_out, k = sizes
    want = {"W_enc": [d_in, width], "b_enc": [width], "W_dec": [width, d_out], "W_skip": [d_out, d_in],
            "b_dec": [d_out]}
    path = folder / WEIGHTS
    try:
        if path.stat().st_size > limits.DICTIONARY_BYTES:
            raise DictionaryUnusable(f"{path}: larger than {limits.DICTIONARY_BYTES:,} bytes")
        with safe_open(str(path), framework="np") as handle:
            shapes = {name: handle.get_slice(name).get_shape() for name in handle.keys()}
            if shapes != want:
                raise DictionaryUnusable(f"{path}: tensors {shapes}, not those its {CFG} describes")
            arrays = {name: handle.get_tensor(name) for name in want}
    except DictionaryUnusable:
        raise
    except Exception as exc:            # a missing file, safetensors' own errors for a damaged one
        raise DictionaryUnusable(f"{path}: damaged or missing ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not all(np.isfinite(a).all() for a in arrays.values()):
        raise DictionaryUnusable(f"{path}: holds NaN or infinity")
    tc = TopKTranscoder(d_in, width, d_out, k)
    with torch.no_grad():
        for name, array in arrays.items():
            getattr(tc, name).copy_(torch.from_numpy(array.astype(np.float32)))
    return tc.eval()
