"""A model's max_len has a floor a model can translate with (config.checks.MODEL_MINIMUMS): a checkpoint whose
config.json says max_len 1 or 2 is refused as damaged, the field named, instead of evaluating to BLEU 0.00."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.config import ModelConfig, preset
from explorer.config.checks import MODEL_MINIMUMS
from explorer.store.catalog import list_checkpoints
from explorer.store.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from explorer.text.encoding import target_ids
from support.model_helpers import FakeTokenizer, make_model

META = {"name": "tiny-test", "src_lang": "en", "tgt_lang": "de", "training": {"step": 5}}


def test_the_floor_is_what_one_target_piece_needs():
    """A target is BOS + pieces + EOS in at most max_len ids: at the floor one piece fits, below it none."""
    class Pieces:
        def encode(self, text, side):
            return [10 + i for i in range(len(text.split()))]

    floor, special = MODEL_MINIMUMS["max_len"], preset("tiny").special
    assert target_ids(Pieces(), "one two", floor, special) == [special.start, 10, special.eos] and floor == 3
    assert target_ids(Pieces(), "one two", floor - 1, special) == [special.start, special.eos]


@pytest.mark.parametrize("max_len", [0, 1, 2])
def test_a_config_below_the_floor_is_refused_naming_the_field(max_len):
    with pytest.raises(ValueError, match=rf"^max_len must be an integer in \[3, 65,536\], not {max_len}$"):
        preset("tiny", max_len=max_len)
    assert preset("tiny", max_len=3).max_len == 3


@pytest.mark.parametrize("max_len", [1, 2])
def test_a_checkpoint_below_the_floor_is_listed_damaged_and_not_loaded(tmp_path, fake_tokenizer, max_len):
    path = save_checkpoint(tmp_path / "ck", make_model(), FakeTokenizer(), meta=META)
    config = json.loads((Path(path) / "config.json").read_text())
    config["model"]["max_len"] = max_len
    (Path(path) / "config.json").write_text(json.dumps(config))
    [info] = list_checkpoints(tmp_path)
    assert info.error and "max_len must be an integer in [3," in info.error, info.error
    with pytest.raises(CheckpointError, match=r"max_len must be an integer in \[3,"):
        load_checkpoint(path)
