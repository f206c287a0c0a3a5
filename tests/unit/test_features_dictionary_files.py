"""A dictionary folder's safetensors files read as untrusted: a FIFO, a device or a folder in place of the
weights or the contexts is refused at once (safe_open of a FIFO waited for a writer forever, and the Features
and Graphs pages with it), a symlink out of the folder is not followed (cfg.json was confined, the weights
were not), and tensors of another type than the float32 cfg.json says are refused, as is `"k": true`."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load as load_tensors, save as save_tensors

from explorer.files.names import FEATURE_CONTEXTS
from explorer.studies.features import contexts, files
from explorer.studies.features.transcoder import TopKTranscoder
from support.waiting import run_watched

SITE, SHA, D = "encoder.layers.0.ffn", "ab" * 32, 16
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def folder(tmp_path):
    return files.save(TopKTranscoder(D, 32, D, 4), tmp_path / "dict", site=SITE, weights_sha256=SHA, model_name="m")


def _load(folder):
    return files.load(folder, site=SITE, weights_sha256=SHA, d_model=D)


def _index(width: int = 32) -> contexts.ContextIndex:
    m, top, bins = width, contexts.TOP, contexts.BINS
    return contexts.ContextIndex(SITE, np.arange(3, dtype=np.int64), 10, np.full((m, top), -1, np.int32),
                                 np.full((m, top), -1, np.int32), np.zeros((m, top), np.float32),
                                 np.zeros(m, np.int64), np.zeros(m, np.float32), np.zeros((m, bins), np.int64))


def _said_without_waiting(call: str) -> str:
    """What `call` (a files.load or contexts.load) says, run in a subprocess: an open that waits
    on a FIFO holds the interpreter whole (safetensors keeps the GIL), so only another process can be
    watched; a hang fails under the stall guard."""
    code = ("from explorer.studies.features import contexts, files\n"
            f"try:\n    {call}\n    print('ACCEPTED')\n"
            f"except files.DictionaryUnusable as err:\n    print('refused', err)\n")
    done = run_watched([sys.executable, "-c", code], "a load beside a FIFO", cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_fifo_as_the_weights_is_refused_at_once(folder):
    weights = folder / files.WEIGHTS
    weights.unlink()
    os.mkfifo(weights)
    said = _said_without_waiting(f"files.load({str(folder)!r}, site={SITE!r}, weights_sha256={SHA!r}, d_model={D})")
    assert said.startswith("refused") and "FIFO" in said and str(weights) in said


def test_a_fifo_as_the_contexts_is_refused_at_once(folder):
    fifo = folder / FEATURE_CONTEXTS
    os.mkfifo(fifo)
    said = _said_without_waiting(f"contexts.load({str(folder)!r}, site={SITE!r}, width=32, n_pairs=10)")
    assert said.startswith("refused") and "FIFO" in said and str(fifo) in said


def test_weights_leading_out_of_the_folder_a_device_or_a_folder_are_refused(folder, tmp_path):
    weights = folder / files.WEIGHTS
    outside = tmp_path / "outside.safetensors"
    os.replace(weights, outside)
    for target, said in ((outside, "leading out of"), ("/dev/zero", "a character device")):
        weights.symlink_to(target)
        with pytest.raises(files.DictionaryUnusable, match=said):
            _load(folder)
        weights.unlink()
    weights.mkdir()
    with pytest.raises(files.DictionaryUnusable, match="a directory, not a regular file"):
        _load(folder)
    weights.rmdir()
    os.replace(outside, weights)
    assert _load(folder).k == 4                                         # the same file inside: read


def test_the_contexts_beside_weights_that_lead_out_are_refused(folder, tmp_path):
    contexts.save(_index(), folder)
    assert contexts.load(folder, site=SITE, width=32, n_pairs=10).tokens == 10
    weights = folder / files.WEIGHTS
    os.replace(weights, tmp_path / "outside.safetensors")
    weights.symlink_to(tmp_path / "outside.safetensors")
    with pytest.raises(files.DictionaryUnusable, match="weights cannot be read.*leading out of"):
        contexts.load(folder, site=SITE, width=32, n_pairs=10)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, bool, np.float16, np.float64])
def test_weights_of_another_type_than_float32_are_refused(folder, dtype):
    weights = folder / files.WEIGHTS
    tensors = load_tensors(weights.read_bytes())
    weights.write_bytes(save_tensors({**tensors, "W_enc": tensors["W_enc"].astype(dtype)}))
    with pytest.raises(files.DictionaryUnusable, match=f"tensors of {np.dtype(dtype).name}, not the float32"):
        _load(folder)


def _saved_contexts(folder) -> tuple[Path, dict, dict]:
    """Contexts saved beside the folder's dictionary: (their file, its metadata, its tensors as copies)."""
    contexts.save(_index(), folder)
    path = folder / FEATURE_CONTEXTS
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    return path, meta, {name: array.copy() for name, array in load_tensors(raw).items()}


def test_contexts_of_another_type_are_refused(folder):
    path, meta, tensors = _saved_contexts(folder)
    path.write_bytes(save_tensors({**tensors, "top_pair": tensors["top_pair"].astype(np.float32)}, metadata=meta))
    with pytest.raises(files.DictionaryUnusable, match="wrong type.*top_pair"):
        contexts.load(folder, site=SITE, width=32, n_pairs=10)


@pytest.mark.parametrize("k", [True, 4.0, "4"])
def test_a_k_that_is_no_whole_number_is_refused(folder, k):
    cfg = json.loads((folder / files.CFG).read_text())
    (folder / files.CFG).write_text(json.dumps({**cfg, "k": k}))
    with pytest.raises(files.DictionaryUnusable, match="not whole numbers above 0"):
        _load(folder)


def test_weights_that_are_not_those_their_cfg_was_written_with_are_refused(folder, tmp_path):
    """A folder trained again and stopped (kill -9) between its two files held the new weights under the old
    cfg.json (the Graphs page drew with them as they were): cfg.json names the weights it was written with.
    A cfg.json naming no weights (an earlier version's) is refused too; a whole folder loads, naming them."""
    tc = _load(folder)
    assert tc.file_sha256 == contexts.weights_hash(folder)
    other = TopKTranscoder(D, 32, D, 4)
    with torch.no_grad():
        other.W_enc.add_(1.0)                                              # trained again: other weights
    again = files.save(other, tmp_path / "again", site=SITE, weights_sha256=SHA, model_name="m")
    (folder / files.WEIGHTS).write_bytes((again / files.WEIGHTS).read_bytes())    # new weights, the old cfg
    with pytest.raises(files.DictionaryUnusable, match="not the weights its cfg.json was written with"):
        _load(folder)
    cfg = json.loads((again / files.CFG).read_text())
    del cfg["metadata"]["dictionary_sha256"]
    (again / files.CFG).write_text(json.dumps(cfg))
    with pytest.raises(files.DictionaryUnusable, match="names no weights"):
        _load(again)


@pytest.mark.parametrize("change", ["top_position -5", "top_position past any sentence", "active past tokens",
                                    "max_value -3", "hist negative", "top_pair -7", "pair without position"])
def test_contexts_whose_values_a_page_cannot_show_are_refused(folder, change):
    """Values the Features page shows as shares or places: a firing count over the tokens read ("fires on
    5338458.25%"), a negative strongest value (a histogram's range: plotly's ValueError), a negative position
    (another context shown, in silence)."""
    path, meta, tensors = _saved_contexts(folder)
    tensors["top_pair"][3, 0], tensors["top_position"][3, 0] = 1, 2                 # a real context, then damaged
    {"top_position -5": lambda: tensors["top_position"].__setitem__((3, 0), -5),
     "top_position past any sentence": lambda: tensors["top_position"].__setitem__((3, 0), 10 ** 6),
     "active past tokens": lambda: tensors["active"].__setitem__(3, 11),             # 10 tokens were read
     "max_value -3": lambda: tensors["max_value"].__setitem__(3, -3.0),
     "hist negative": lambda: tensors["hist"].__setitem__((3, 0), -100),
     "top_pair -7": lambda: tensors["top_pair"].__setitem__((3, 0), -7),
     "pair without position": lambda: tensors["top_position"].__setitem__((3, 0), -1)}[change]()
    path.write_bytes(save_tensors(tensors, metadata=meta))
    with pytest.raises(files.DictionaryUnusable, match="values out of range"):
        contexts.load(folder, site=SITE, width=32, n_pairs=10)


def test_weights_past_any_training_are_refused(folder):
    """3e38 is finite, so the NaN check let it through: the first product overflowed (the Graphs page said
    "the graph has a cycle", `features evaluate` wrote NaN into its JSON)."""
    weights = folder / files.WEIGHTS
    tensors = {name: array.copy() for name, array in load_tensors(weights.read_bytes()).items()}
    tensors["W_enc"][0, 0] = 3e38
    weights.write_bytes(save_tensors(tensors))
    with pytest.raises(files.DictionaryUnusable, match="values beyond 1e\\+06"):
        _load(folder)
