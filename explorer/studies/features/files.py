"""A dictionary on disk, in SAELens's format: a folder with cfg.json and sae_weights.safetensors, so that
other tools read our dictionaries (tests load both kinds with SAELens and compare their encodings).

An FFN site's transcoder: SAELens 6.54 has skip transcoders with ReLU and JumpReLU latents but no TopK
one, so cfg.json names the architecture "topk_skip_transcoder" with its `k`; SAELens reads it once that
name is registered with its SkipTranscoder whose activation is its own TopK (tests/unit/test_features.py
shows how); a plain transcoder (no skip: job.FeatureSettings.skip) is saved the same way with W_skip 0,
which computes the same. A residual-stream site's SAE: SAELens's own plain "topk" SAE (no W_skip, no d_out,
apply_b_dec_to_input false, hook_name the layer's output), which SAE.load_from_disk reads as it is. The metadata says
which checkpoint (weights hash), which site and whether it is the random baseline; load() checks them
against the model and site it is asked for (the architecture against the site's kind) before it reads a
tensor, and every shape against cfg.json. The metadata also holds the sha256 of the weights file written with
it (`dictionary_sha256`): each file is written whole, but a training stopped between the two (kill -9) left
a folder trained again with the new weights under the old cfg.json, which the Graphs page used as it was;
load() refuses weights that are not those their cfg.json was written with.
"""
from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load as load_tensors, save as save_tensors

from explorer.files import limits
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import SAE_CFG, SAE_WEIGHTS
from explorer.files.user_files import UserFileError, absent_or_odd, parse_json, read_user_file, read_user_json
from explorer.studies.features.sites import is_stream
from explorer.studies.features.transcoder import TopKTranscoder

CFG, WEIGHTS = SAE_CFG, SAE_WEIGHTS
ARCHITECTURE = "topk_skip_transcoder"    # an FFN site's
SAE_ARCHITECTURE = "topk"                # a residual-stream site's (SAELens's TopK SAE)
SAELENS_VERSION = "6.54.12"          # the format's version as SAELens writes it
# A dictionary's weights stay small (unit decoder rows; encoder, skip and biases on the scale of the model's
# activations); a value past this overflowed float32 in the first product (a graph then said "the graph has
# a cycle", `features evaluate` wrote NaN into its JSON).
MAX_WEIGHT = 1e6


class DictionaryUnusable(ValueError):
    """A dictionary folder that cannot be used here; the message says why in one line."""


def save(tc: TopKTranscoder, folder: Path, *, site: str, weights_sha256: str, model_name: str,
         random_decoder: bool = False) -> Path:
    """A stream site's SAE is saved without W_skip (refused unless it is 0: what SAELens reads is all)."""
    folder = Path(folder)
    stream = is_stream(site)
    if stream and bool(tc.W_skip.detach().any()):
        raise ValueError(f"{site} is a residual-stream site: its SAE has no skip, but this dictionary's W_skip "
                         "is not 0")
    folder.mkdir(parents=True, exist_ok=True)
    d_in, width = tc.W_enc.shape
    hooks = ({"hook_name": f"{site[:-len('resid')]}resid_post"} if stream
             else {"hook_name": f"{site}.in", "hook_name_out": f"{site}.out"})
    cfg = {"architecture": SAE_ARCHITECTURE if stream else ARCHITECTURE, "d_in": int(d_in), "d_sae": int(width),
           **({} if stream else {"d_out": int(tc.W_dec.shape[1])}),
           "k": tc.k, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": False,
           "normalize_activations": "none", "reshape_activations": "none",
           "metadata": {"sae_lens_version": SAELENS_VERSION, "model_name": model_name, **hooks, "site": site,
                        "weights_sha256": weights_sha256, "random_decoder": bool(random_decoder)}}
    names = ("W_enc", "b_enc", "W_dec", "b_dec") if stream else ("W_enc", "b_enc", "W_dec", "W_skip", "b_dec")
    tensors = {name: np.ascontiguousarray(getattr(tc, name).detach().float().numpy()) for name in names}
    data = save_tensors(tensors)
    cfg["metadata"]["dictionary_sha256"] = hashlib.sha256(data).hexdigest()
    write_bytes_atomic(folder / WEIGHTS, data)                           # the weights first, the cfg naming
    write_bytes_atomic(folder / CFG, json.dumps(cfg, indent=1).encode())  # them last (load checks the pair)
    tc.file_sha256 = cfg["metadata"]["dictionary_sha256"]               # as load() sets it: no second read
    return folder


def load(folder: Path, *, site: str, weights_sha256: str, d_model: int) -> TopKTranscoder:
    """The transcoder (an FFN site) or SAE (a stream site, W_skip 0) in `folder`, if it was made for this site
    of these weights; DictionaryUnusable else (float32 tensors only: what save writes and cfg.json says)."""
    folder = Path(folder)
    try:
        cfg = read_user_json(folder / CFG, limits.JSON_BYTES, inside=folder)
    except (UserFileError, ValueError) as err:
        raise DictionaryUnusable(f"{folder}: no readable {CFG} ({err})") from None
    meta = cfg.get("metadata") if isinstance(cfg, dict) else None
    stream = is_stream(site)
    if not isinstance(meta, dict) or cfg.get("architecture") not in (ARCHITECTURE, SAE_ARCHITECTURE):
        raise DictionaryUnusable(f"{folder}: not a TopK transcoder or SAE of this project")
    if (cfg.get("architecture") == SAE_ARCHITECTURE) != stream:
        raise DictionaryUnusable(f"{folder}: a {'residual-stream SAE' if not stream else 'transcoder of an FFN'}, "
                                 f"not a dictionary for {site}")
    wrong = [k for k, v in (("site", site), ("weights_sha256", weights_sha256)) if meta.get(k) != v]
    if wrong:
        raise DictionaryUnusable(f"{folder}: made for another {' and '.join(wrong)} (stale or foreign): train it again")
    sizes = [cfg.get(k) for k in ("d_in", "d_sae", "d_in" if stream else "d_out", "k")]
    if not all(type(v) is int and v > 0 for v in sizes):      # `"k": true` is an int to isinstance
        raise DictionaryUnusable(f"{folder}: {CFG} gives sizes {sizes}, not whole numbers above 0")
    if sizes[0] != d_model or sizes[2] != d_model or sizes[3] > sizes[1] \
            or (sizes[0] * sizes[1] * 2 + sizes[0] * sizes[2]) * 4 > limits.DICTIONARY_BYTES:
        raise DictionaryUnusable(f"{folder}: sizes {sizes} do not fit a model of width {d_model}")
    d_in, width, d_out, k = sizes
    want = {"W_enc": [d_in, width], "b_enc": [width], "W_dec": [width, d_out], "b_dec": [d_out],
            **({} if stream else {"W_skip": [d_out, d_in]})}
    path = folder / WEIGHTS
    _, arrays, digest = read_safetensors(path, folder, limits.DICTIONARY_BYTES)
    shapes = {name: list(arrays[name].shape) for name in sorted(arrays)}
    if shapes != want:
        raise DictionaryUnusable(f"{path}: tensors {shapes}, not those its {CFG} describes")
    odd = sorted({str(array.dtype) for array in arrays.values()} - {"float32"})
    if odd:
        raise DictionaryUnusable(f"{path}: tensors of {', '.join(odd)}, not the float32 its {CFG} says: "
                                 "train it again")
    if not all(np.isfinite(a).all() for a in arrays.values()):
        raise DictionaryUnusable(f"{path}: holds NaN or infinity")
    if any(a.size and float(np.abs(a).max()) > MAX_WEIGHT for a in arrays.values()):    # 3e38 is finite:
        raise DictionaryUnusable(f"{path}: holds values beyond {MAX_WEIGHT:g}, which no training writes")  # NaN next
    if meta.get("dictionary_sha256") != digest:
        why = ("its cfg.json names no weights (written by an earlier version)" if "dictionary_sha256" not in meta
               else "not the weights its cfg.json was written with (a training stopped part way?)")
        raise DictionaryUnusable(f"{path}: {why}: train it again")
    tc = TopKTranscoder(d_in, width, d_out, k)
    with torch.no_grad():
        for name, array in arrays.items():
            getattr(tc, name).copy_(torch.from_numpy(array.copy()))
    tc.file_sha256 = digest              # what a result file names to say which dictionary its figures are of
    return tc.eval()


def read_safetensors(path: Path, folder: Path,
                     limit: int) -> tuple[dict[str, str], dict[str, np.ndarray], str]:
    """(metadata, {name: array}, the file's sha256) of a safetensors file of a dictionary's folder;
    DictionaryUnusable naming the file and what is wrong otherwise.

    Why not safe_open(path): it opens whatever the path names, so a FIFO there waited for a writer forever
    (the Features and Graphs pages with it) and a symlink leading out of the folder was followed. Here the
    file is read as explorer.files.user_files reads untrusted files (a regular file, inside `folder`, at
    most `limit` bytes, never a blocking open), then parsed from memory: the bytes and the arrays, at most
    twice `limit` in all."""
    if problem := absent_or_odd(path):
        raise DictionaryUnusable(f"{path}: {problem}")
    try:
        data = read_user_file(path, limit, inside=folder)
    except UserFileError as err:
        raise DictionaryUnusable(str(err)) from None
    try:
        arrays = load_tensors(data)                     # checks the header, every offset and the file's length
        (n,) = struct.unpack("<Q", data[:8])
        header = parse_json(data[8:8 + n])
    except Exception as exc:                            # safetensors' own errors for a damaged file
        raise DictionaryUnusable(f"{path}: damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return (meta if isinstance(meta, dict) else {}), arrays, hashlib.sha256(data).hexdigest()
