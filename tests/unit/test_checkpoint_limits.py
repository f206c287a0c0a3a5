"""A checkpoint directory is untrusted input: its config.json must never drive an allocation before it
is checked against its weights file, and listing must never raise, whatever the directory holds.

Memory is measured in a fresh process (peak resident set, ru_maxrss) against the same process
listing and loading a healthy checkpoint, so the bound is on what the damaged one adds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from explorer.store.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from explorer.store.catalog import list_checkpoints
from explorer.config import ModelConfig, preset
from explorer.config.checks import MODEL_LIMITS
from explorer.model import model_skeleton, parameter_count
from support.damage import ABSURD, probe
from support.model_helpers import FakeTokenizer, make_model

META = {"name": "tiny-test", "src_lang": "en", "tgt_lang": "de", "training": {"step": 5}}
EXTRA_RSS = 120 << 20           # what listing + loading a damaged checkpoint may add to a healthy one's peak



def healthy(path: Path) -> Path:
    return save_checkpoint(path, make_model(), FakeTokenizer(), meta=META)


def with_model(path: Path, **overrides) -> Path:
    config = json.loads((path / "config.json").read_text())
    config["model"].update(overrides)
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("cfg", [
    preset("tiny"), preset("small"), preset("base"), preset("small", positions="learned"),
    preset("small", norm_first=True), preset("tiny", tie_embeddings=False, src_vocab_size=300, tgt_vocab_size=500),
    preset("tiny", max_len=77, n_encoder_layers=1, n_decoder_layers=5, d_ff=100),
    preset("tiny", final_logits_bias=True), preset("tiny", tie_output=False),
    preset("tiny", tie_output=False, final_logits_bias=True, activation="swish", pe_layout="halves",
           scale_embeddings=False),
    preset("tiny", tie_embeddings=False, tie_output=True, src_vocab_size=300, tgt_vocab_size=500),
    preset("tiny", tie_embeddings=False, tie_output=False, final_logits_bias=True, src_vocab_size=300,
           tgt_vocab_size=500),
], ids=lambda c: (f"d{c.d_model}-{c.positions}-{'pre' if c.norm_first else 'post'}-"
                  f"{'tied' if c.tie_embeddings else 'untied'}-out{'tied' if c.output_tied else 'own'}"
                  f"{'-bias' if c.final_logits_bias else ''}-{c.activation}-{c.pe_layout}"))
def test_parameter_count_from_the_config_equals_the_models(cfg):
    assert parameter_count(cfg) == model_skeleton(cfg).num_parameters()


@pytest.mark.parametrize("kind", list(ABSURD))
def test_absurd_model_configs_are_refused_before_anything_is_built(kind):
    fields = {**preset("tiny").to_dict(), **ABSURD[kind]}
    if kind in ("large dims, tiny weights", "large vocabulary", "many layers"):
        ModelConfig(**fields)                      # within the limits: checked against the weights instead
        return
    with pytest.raises(ValueError) as err:
        ModelConfig(**fields)
    name = next(iter(ABSURD[kind]))
    assert name in str(err.value) or "max_len x d_model" in str(err.value)


def test_limits_admit_the_papers_big_model_and_real_vocabularies():
    big = preset("base", d_model=1024, d_ff=4096, n_heads=16, src_vocab_size=256_206, tgt_vocab_size=256_206,
                 max_len=1024)
    assert big.d_model <= MODEL_LIMITS["d_model"] and parameter_count(big) > 200e6


@pytest.mark.parametrize("kind", list(ABSURD))
def test_listing_marks_a_damaged_config_and_loading_refuses_it(kind, tmp_path, fake_tokenizer):
    path = with_model(healthy(tmp_path / "ck"), **ABSURD[kind])
    [info] = list_checkpoints(tmp_path)
    assert info.error and "config.json" in info.error or "model.safetensors" in info.error, info.error
    with pytest.raises(CheckpointError):
        load_checkpoint(path)




@pytest.mark.parametrize("kind", ["huge d_model", "huge max_len", "large dims, tiny weights", "large vocabulary"])
def test_a_damaged_config_costs_bounded_memory_to_list_and_load(kind, tmp_path):
    reference = probe(healthy(tmp_path / "good" / "ck").parent)
    assert reference["error"] is None and reference["load"] == "loaded"
    damaged = probe(with_model(healthy(tmp_path / "bad" / "ck"), **ABSURD[kind]).parent)
    assert damaged["error"] and damaged["load"] != "loaded"
    assert damaged["peak"] - reference["peak"] < EXTRA_RSS, (damaged, reference)


def test_nan_weights_and_flipped_bytes_are_marked_damaged_in_the_listing(tmp_path, fake_tokenizer):
    model = make_model()
    with torch.no_grad():
        model.decoder.layers[0].ffn.w_1.weight[0, 0] = float("nan")
    save_checkpoint(tmp_path / "nan", model, FakeTokenizer(), meta=META)
    flipped = healthy(tmp_path / "flipped")
    data = bytearray((flipped / "model.safetensors").read_bytes())
    data[-100] ^= 0x01                                      # one bit of one weight: only the sha256 sees it
    (flipped / "model.safetensors").write_bytes(bytes(data))
    garbage_tokenizer = healthy(tmp_path / "garbage-tokenizer")
    (garbage_tokenizer / FakeTokenizer.FILE).write_bytes(os.urandom(64))
    infos = {i.path.name: i for i in list_checkpoints(tmp_path)}
    assert "NaN" in infos["nan"].error and "w_1" in infos["nan"].error
    assert "sha256" in infos["flipped"].error
    assert FakeTokenizer.FILE in infos["garbage-tokenizer"].error
    for name, expected in (("nan", "NaN"), ("flipped", "sha256"), ("garbage-tokenizer", "tokenizer")):
        with pytest.raises(CheckpointError, match=expected):
            load_checkpoint(tmp_path / name)


def test_the_contents_check_follows_a_changed_file(tmp_path, fake_tokenizer):
    path = healthy(tmp_path / "ck")
    assert list_checkpoints(tmp_path)[0].error is None
    (path / FakeTokenizer.FILE).write_text("not json")      # replaced later: the listing sees the new file
    os.utime(path / FakeTokenizer.FILE, ns=(1, 1))
    assert FakeTokenizer.FILE in list_checkpoints(tmp_path)[0].error


def test_a_symlink_out_of_the_root_is_not_followed(tmp_path, fake_tokenizer):
    outside = healthy(tmp_path / "outside" / "ck")
    root = tmp_path / "root"
    inside = healthy(root / "real")
    (root / "escape").symlink_to(outside.parent, target_is_directory=True)
    (root / "alias").symlink_to(inside, target_is_directory=True)            # within the root: followed
    assert sorted(i.path.name for i in list_checkpoints(root)) == ["alias", "real"]
