"""`python -m benchmarks features --mean-ablation N`: the two ends of CE recovered that need no dictionary,
printed as `features evaluate` computes them (the model's CE, every FFN mean-ablated), so the figures in
docs/FEATURES.md have a command that prints them."""
from __future__ import annotations

import re

import pytest

from benchmarks import features as bench
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.sentences import build_sentences
from explorer.studies.features import sites, splice
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"


def test_the_mean_ablation_prints_the_models_ce_and_every_ffn_mean_ablated(capsys):
    assert bench.main(["--mean-ablation", "20", "--checkpoint", str(NUMBERS)]) == 0
    said = capsys.readouterr().out
    found = re.search(r"the first 20 held-out pairs: CE per target token ([0-9.]+) for the model, ([0-9.]+) with "
                      r"every FFN \((\d+)\) mean-ablated", said)
    assert found, said
    model_ce, ablated, ffns = float(found.group(1)), float(found.group(2)), int(found.group(3))
    ckpt = load_checkpoint(NUMBERS)
    assert ffns == len(sites.all_sites(ckpt.model, "ffn")) and ablated > model_ce
    from explorer.studies.common.command import checkpoint_and_held_out
    _, pairs = checkpoint_and_held_out(str(NUMBERS), "cpu")
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, 20, "reference")
    assert model_ce == pytest.approx(splice.target_ce(ckpt.model, sents), abs=6e-4)     # printed to 3 places
    with pytest.raises(SystemExit):
        bench.main(["--mean-ablation", "0"])
