"""The three kinds of model the lens and patching tests run on, built the cheap way.

* tiny: tests/support/model_helpers.py's tiny model, post-LN (the paper's and the shipped models') or
  pre-LN (where the lenses apply the stack's final LayerNorm);
* base size: 6+6 layers x 8 heads, d=512, the 58,101-piece vocabulary and Marian's options of
  tests/support/base_model.py, built as a model only (no tokenizer training, no checkpoint on disk:
  seconds, not tens of seconds), with a non-zero logits bias like the checkpoint there;
* imported: a random Hugging Face MarianMTModel (tests/support/marian_helpers.py) through
  explorer.interop's importer and the checkpoint loader, float32, with its VocabTokenizer and
  Marian's special ids (eos 0, the decoder starting with pad).
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import torch

from explorer.config import DecodeConfig, preset
from explorer.model import Transformer
from support.base_model import MARIAN_OPTIONS, VOCAB_SIZE
from support.marian_helpers import random_marian

SHORT = DecodeConfig(strategy="greedy", max_len_a=0.0, max_len_b=6)     # a random model runs to its limit
SHORT_BEAM = DecodeConfig(strategy="beam", beam_size=3, n_best=3, max_len_a=0.0, max_len_b=6)


# Built once per test process and shared by the lens and patching test files (tests must not change
# them: a test that needs another dtype works on a copy).
@functools.lru_cache(maxsize=None)
def base_size_model(seed: int = 0) -> Transformer:
    cfg = preset("base", src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, max_len=64, dropout=0.0,
                 **MARIAN_OPTIONS)
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.generator.proj.bias.normal_(0.0, 0.1)
    return model


@functools.lru_cache(maxsize=None)
def imported_marian():
    """(model, tokenizer) of a random Marian model imported as a user would (float32)."""
    from explorer.interop.hf_import import import_marian
    from explorer.store.checkpoint import load_checkpoint

    directory = Path(tempfile.mkdtemp(prefix="layer-models-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    random_marian(directory / "hf")
    ckpt = load_checkpoint(import_marian(str(directory / "hf"), directory / "ours", dtype=torch.float32))
    return ckpt.model, ckpt.tokenizer
