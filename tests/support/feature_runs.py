"""Shared by the Features and Graphs AppTests: a runs folder holding the dictionaries the app's one-site job
makes, at small settings, for chosen sites of the shipped numbers-en-de, and the app pointed at it."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pytest
import torch

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.features.job import SITE, FeatureSettings, site_result_path
from explorer.studies.features.sites import sites as every_ffn
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
# FFN sites' transcoders at width/k, residual-stream sites' SAEs at sae_width/sae_k: seconds, not minutes
SMALL = FeatureSettings(width=64, k=4, sae_width=64, sae_k=4, steps=40, batch=256, rows=3000, held_rows=500)
needs_numbers = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")


def numbers_dictionaries(root: Path, sites: Iterable[str] | None = None) -> str:
    """Each site's one-site job result (its dictionaries and contexts) under root (every FFN site when
    sites is None); the checkpoint's weights hash, which names the dictionaries' folder."""
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_RUNS_DIR", str(root))
        ckpt = load_checkpoint(NUMBERS)
        corpus = load_corpus("numbers")
        sha = ckpt.meta["weights_sha256"]
        for site in every_ffn(ckpt.model) if sites is None else sites:
            SITE.to_file(site_result_path(sha, site), ckpt.model, ckpt.tokenizer, corpus.train[:5000], corpus.dev,
                         SMALL, site=site, context=RunContext(meta=ckpt.meta))
    return sha


def point_app_at(monkeypatch, root: Path) -> None:
    """The app reads the shipped checkpoints and the dictionaries under root."""
    monkeypatch.delenv("EXPLORER_CHECKPOINT_ROOTS", raising=False)
    monkeypatch.delenv("EXPLORER_MODELS_DIR", raising=False)
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(root))
