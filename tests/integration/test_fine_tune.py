"""Fine-tuning a shipped checkpoint with the proposed schedule keeps what it knows.

The from-scratch settings (the Train form's defaults before the recipe: warm-up 400, factor 1) took
numbers-en-de's dev BLEU from 100 to 89 in 300 steps of 2,000 tokens, and to 93.1 in 300 steps of 1,000
tokens (the batch here, for CI's time: 34 s of training against ~60 s); the recipe
(training.schedule.fine_tune_schedule) must not lose more than 1 BLEU point in the same 300 steps on the
same data (it keeps 100).
"""
from __future__ import annotations

import json
import sys

import pytest

from explorer.data import load_corpus
from explorer.data.encoded import encode_pairs
from explorer.evaluation.scores import evaluate_split
from explorer.runtime.device import resolve_device
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.checkpoint import load_checkpoint
from explorer.training.schedule import fine_tune_schedule
from support.train_helpers import REPO, run

SHIPPED = REPO / "checkpoints" / "numbers-en-de"
STEPS, DEV, BATCH_TOKENS = 300, 200, 1000


@pytest.mark.slow
def test_the_fine_tune_recipe_keeps_dev_bleu_of_numbers_en_de(tmp_path):
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    ckpt = load_checkpoint(SHIPPED)
    corpus = load_corpus("numbers")
    dev = encode_pairs(ckpt.tokenizer, corpus.dev, 256)
    before = evaluate_split(ckpt.model, ckpt.tokenizer, dev, DEV, device=resolve_device("cpu"), tgt_lang="de")["bleu"]
    recipe = fine_tune_schedule(ckpt.meta["training"], ckpt.config.d_model)
    assert recipe.warmup < 100 and recipe.peak < recipe.ended_at
    run_dir = tmp_path / "fine-tune"
    proc = run([sys.executable, "-m", "explorer.train", "--run-dir", str(run_dir), "--dataset", "numbers",
                "--init-from", str(SHIPPED), "--max-steps", str(STEPS), "--batch-tokens", str(BATCH_TOKENS),
                "--warmup", str(recipe.warmup), "--lr-factor", repr(recipe.lr_factor), "--eval-every", str(STEPS),
                "--eval-sentences", str(DEV), "--save-every", str(STEPS), "--threads", "2"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = [r for r in rf.read_metrics(run_dir) if r.get("kind") == "eval" and r.get("step") == STEPS][-1]["bleu"]
    print(f"numbers-en-de dev BLEU ({DEV} sentences): {before:.2f} before, {after:.2f} after {STEPS} fine-tuning "
          f"steps (warm-up {recipe.warmup}, factor {recipe.lr_factor:.4f}, peak {recipe.peak:.2e})")
    assert after >= before - 1.0
    saved = json.loads((rp.checkpoint_dirs(run_dir)[-1] / "config.json").read_text())["training"]
    assert saved["warmup"] == recipe.warmup and saved["last_lr"] > 0       # the next fine-tune knows where this one ended
