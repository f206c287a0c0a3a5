"""The memory a model takes is bounded in bytes before anything is allocated, whatever the files claim:
a sparse weights file of a few KB on disk may describe a model of half a billion parameters with a
header that matches its config exactly. Imports do not read a tied matrix three times, and an import
computes what its source computes or refuses (NaN weights, a partly NaN output bias).

Memory is measured in a fresh process (peak resident set) next to the same process listing and
loading a healthy checkpoint, so the bound is on what the sparse one adds.
"""
from __future__ import annotations

import json
import math
import struct
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from explorer.config import preset
from explorer.files.settings import MAX_MODEL_BYTES
from explorer.interop.cli import main as convert
from explorer.interop.marian import state_from_hf
from explorer.model import model_skeleton
from explorer.store.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from explorer.store.weights import alias_groups, load_bytes
from support.damage import probe
from support.marian_helpers import random_marian
from support.model_helpers import FakeTokenizer, make_model
from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]
META = {"name": "sparse", "src_lang": "en", "tgt_lang": "de", "training": {}}
EXTRA_RSS = 150 << 20           # what a refused sparse model may add to a healthy one's peak


def sparse_checkpoint(path: Path, **sizes) -> Path:
    """A checkpoint whose config describes `sizes` and whose weights file has a header of exactly those
    tensors, float16, with no data written: a sparse file (a few KB on disk, its size as the header says)."""
    save_checkpoint(path, make_model(), FakeTokenizer(), meta=META)
    config = json.loads((path / "config.json").read_text())
    config["model"].update(sizes)
    config.pop("weights_sha256")
    (path / "config.json").write_text(json.dumps(config))
    skeleton = model_skeleton(preset("tiny").__class__.from_dict(config["model"]))
    state = skeleton.state_dict()
    header, offset = {}, 0
    for names in alias_groups(skeleton):
        n = 2 * math.prod(state[names[0]].shape)
        header[names[0]] = {"dtype": "F16", "shape": list(state[names[0]].shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    with open(path / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)
    return path




def test_a_sparse_half_billion_parameter_model_is_refused_in_bounded_memory(tmp_path):
    path = sparse_checkpoint(tmp_path / "big" / "ck", src_vocab_size=1 << 20, tgt_vocab_size=1 << 20, d_model=512,
                             n_heads=8, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
    weights = path / "model.safetensors"
    assert weights.stat().st_size > 1 << 30 and weights.stat().st_blocks * 512 < 1 << 20   # sparse: 1 GB, < 1 MB
    reference = probe(sparse_checkpoint(tmp_path / "small" / "ck").parent)
    assert reference["error"] is None and reference["load"] == "loaded"
    found = probe(path.parent)
    assert "GiB of memory" in found["error"] and "GiB of memory" in found["load"], found
    assert found["peak"] - reference["peak"] < EXTRA_RSS, (found, reference)


def test_the_bound_counts_what_the_load_holds(tmp_path):
    """load_bytes >= what load_checkpoint really adds (measured), and is not wildly above it."""
    from explorer.model import Transformer
    cfg = preset("base", src_vocab_size=16000, tgt_vocab_size=16000)       # ~200 MB in float32: above import peaks
    save_checkpoint(tmp_path / "ck", Transformer(cfg), FakeTokenizer(16000), meta=META, dtype=torch.float16)
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from support import model_helpers
        from explorer.store import checkpoint
        checkpoint._tokenizer_loader = lambda: model_helpers.FakeTokenizer.load
        import torch

        def peak():                      # this process image's own peak (ru_maxrss carries the parent's over exec)
            status = open("/proc/self/status").read()
            return int(status.split("VmHWM:")[1].split()[0]) * 1024
        before = peak()
        checkpoint.load_checkpoint({str(tmp_path / 'ck')!r})
        print(json.dumps(peak() - before))
    """)
    run = run_watched([sys.executable, "-c", script], "the loading probe", cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    added = json.loads(run.stdout.strip().splitlines()[-1])
    from explorer.store.checkpoint import read_weights_header
    bound = load_bytes(cfg, read_weights_header(tmp_path / "ck"))
    assert added <= bound + (16 << 20) and bound < 3 * added, (added, bound)


def test_the_limit_is_read_from_the_environment(tmp_path, monkeypatch, fake_tokenizer):
    path = save_checkpoint(tmp_path / "ck", make_model(), FakeTokenizer(), meta=META)
    monkeypatch.setenv("EXPLORER_MAX_MODEL_BYTES", "1000")
    with pytest.raises(CheckpointError, match="MiB of memory, more than the 1,000 bytes one model may take"):
        load_checkpoint(path)
    monkeypatch.setenv("EXPLORER_MAX_MODEL_BYTES", str(MAX_MODEL_BYTES))
    load_checkpoint(path)


# ---- imports -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def marian_source(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("hf") / "opus-mt-xx"
    random_marian(source)
    return source


def test_a_tied_matrix_is_read_and_converted_once(marian_source):
    from explorer.interop import hf_source as src
    from explorer.interop.marian import model_config_from_hf
    from explorer.text.vocab_tokenizer import VocabTokenizer

    get, _ = src.tensor_reader(marian_source)
    reads: list[str] = []

    def counting_get(name):
        reads.append(name)
        return get(name)
    cfg = model_config_from_hf(src.read_json(marian_source / "config.json"), VocabTokenizer.load(marian_source).special,
                               logits_bias=True)
    shapes = {n: tuple(p.shape) for n, p in model_skeleton(cfg).state_dict().items()}
    state = state_from_hf(counting_get, cfg, shapes)
    assert state["encoder.embed.lookup.weight"] is state["decoder.embed.lookup.weight"] is state["generator.proj.weight"]
    shared = [n for n in reads if n.endswith("shared.weight")]
    assert len(shared) == 1, reads


def damaged_copy(source: Path, tmp_path: Path, edit) -> Path:
    from safetensors.torch import load_file, save_file
    copy = tmp_path / "damaged"
    copy.mkdir()
    for f in source.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(copy / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    return copy


@pytest.mark.parametrize("what", ["a NaN weight", "a partly NaN output bias"])
def test_an_import_that_would_not_compute_what_its_source_computes_is_refused(marian_source, tmp_path, capsys, what):
    def edit(tensors):
        if what == "a NaN weight":
            name = next(n for n in tensors if n.endswith("fc1.weight"))
            tensors[name][0, 0] = float("nan")
        else:
            tensors["final_logits_bias"].zero_()
            tensors["final_logits_bias"][0, 3] = float("nan")
    source = damaged_copy(marian_source, tmp_path, edit)
    out = tmp_path / "imported"
    assert convert(["from-hf", str(source), str(out)]) == 2
    assert "NaN" in capsys.readouterr().err
    assert not out.exists()


def test_an_import_whose_config_describes_billions_of_parameters_is_refused_before_reading(marian_source, tmp_path,
                                                                                              capsys):
    """The weights are never read: the config alone (d_model 4096, FFN 16384: ~2.5B parameters) is too much."""
    copy = tmp_path / "huge"
    copy.mkdir()
    for f in marian_source.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    config = json.loads((copy / "config.json").read_text())
    config.update(d_model=4096, encoder_ffn_dim=16384, decoder_ffn_dim=16384, encoder_attention_heads=16,
                  decoder_attention_heads=16, encoder_layers=8, decoder_layers=8)
    (copy / "config.json").write_text(json.dumps(config))
    assert convert(["from-hf", str(copy), str(tmp_path / "out")]) == 2
    assert "GiB of memory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
