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


def test_the_site_job_runs_as_the_app_starts_it_and_leaves_nothing(monkeypatch, tmp_path, capsys):
    """`--site-job SITE`: the Features page's one-site job with the app's settings (here made small), timed,
    in a runs folder of its own that is removed: FEATURES' page-job timings come from it."""
    from explorer.studies.features.job import FeatureSettings
    from webapp.views import feature_sites
    small = FeatureSettings(width=32, k=4, steps=20, batch=64, rows=1000, held_rows=200)
    monkeypatch.setattr(feature_sites, "app_settings", lambda site: small)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    assert bench.main(["--site-job", "encoder.layers.0.ffn", "--checkpoint", str(NUMBERS)]) == 0
    said = capsys.readouterr().out
    found = re.search(r"numbers-en-de encoder.layers.0.ffn: the app's one-site job \(20 steps, 1,000 rows\) in \d+ s "
                      r".*FVE ([0-9.]+) \(random ([0-9.]+)", said)
    assert found, said
    assert 0 < float(found.group(1)) <= 1 and float(found.group(2)) <= 1
    assert not (tmp_path / "runs").exists()                             # the job's folder was its own
