"""Checkpoints the size of the paper's base Transformer, with random weights, for the app's tests.

Imported OPUS-MT (Marian) models are base-size: 6+6 layers x 8 heads, d_model 512, d_ff 2048 and a
~58k-piece vocabulary. Pages that read well on the shipped 4-head, 3+3-layer models may not at 48
heads per kind (grids, the beam tree, bertviz's size limits), and the vocabulary sets the cost of
every decoding step, so these checkpoints have those sizes. Two of them, built once per test session
in one temporary models folder (~300 MB on disk, a few seconds):

IMPORTED ("opus-mt-random") is what a user gets from `python -m explorer.convert from-hf`: a random
transformers.MarianMTModel with opus-mt's dimensions and options (swish, sinusoids in halves, scaled
embeddings, a non-zero final_logits_bias, 512 positions) and its tokenizer files (source.spm and
target.spm trained on a few lines, vocab.json padded with made-up pieces to 58,101 entries:
tests/support/marian_helpers.py), saved with save_pretrained and imported with
explorer.interop.hf_import.import_marian. So it has Marian's special ids (eos 0, unk 1, pad 58,100,
the decoder starting with pad) and a VocabTokenizer: every page meets ids that differ from the
defaults, which a native checkpoint cannot show.

NAME ("base-random") is the same size with this project's own sentencepiece Tokenizer (a word-level
model over VOCAB_SIZE - 4 made-up words plus the words of SENTENCE and TARGET), so its special ids
are the defaults (pad 0, unk 1, bos 2, eos 3), and Marian's options set by hand. It is the checkpoint
the analyses benchmarks measure, so it is built in benchmarks/fixtures.py (build_base_checkpoint, with
NAME, VOCAB_SIZE, SENTENCE, TARGET and MARIAN_OPTIONS), imported here.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from benchmarks.fixtures import MARIAN_OPTIONS, NAME, SENTENCE, TARGET, VOCAB_SIZE, build_base_checkpoint  # noqa: F401
from support.marian_helpers import SRC_LINES, TGT_LINES, random_marian

IMPORTED = "opus-mt-random"


def build_imported_base(directory: Path, seed: int = 0) -> Path:
    """Import a random opus-mt-sized MarianMTModel into `directory` / IMPORTED (float16); returns its path.

    The Hugging Face directory is written in a throw-away folder in float16 (half the bytes of
    OPUS-MT's float32 files; the importer casts either way). EOS's logit bias (2.5) is chosen for
    a random model's nearly flat distribution over 58k pieces: at 3 every output is EOS alone, at 2
    greedy and beam search run to the length limit; at 2.5 outputs run tens of steps and beam
    search ends some before the limit, so the Beam page has steps and finished candidates to show.
    """
    with tempfile.TemporaryDirectory(prefix="marian-base-") as tmp:
        hf_dir = Path(tmp) / "hf"
        random_marian(hf_dir, d_model=512, heads=8, ffn=2048, layers=6, vocab_size=VOCAB_SIZE, max_positions=512,
                      seed=seed, std=0.02, eos_bias=2.5, src_lines=SRC_LINES + [SENTENCE],
                      tgt_lines=TGT_LINES + [TARGET], dtype=torch.float16)
        from explorer.interop.hf_import import import_marian
        return import_marian(str(hf_dir), Path(directory) / IMPORTED, dtype=torch.float16,
                             domain="none: random weights (tests/support/base_model.py)")


@pytest.fixture(scope="session")
def base_models_dir(tmp_path_factory) -> Path:
    """A models folder ($EXPLORER_MODELS_DIR) holding the base-size checkpoints NAME and IMPORTED."""
    folder = tmp_path_factory.mktemp("base-models")
    build_base_checkpoint(folder)
    build_imported_base(folder)
    return folder
