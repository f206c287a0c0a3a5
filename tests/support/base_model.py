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
are the defaults (pad 0, unk 1, bos 2, eos 3), and Marian's options set by hand.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from explorer.config import preset
from explorer.model import Transformer
from explorer.store.checkpoint import save_checkpoint
from explorer.text.tokenizer import Tokenizer
from support.marian_helpers import SRC_LINES, TGT_LINES, made_up_words, random_marian

NAME = "base-random"
IMPORTED = "opus-mt-random"
VOCAB_SIZE = 58101                   # opus-mt-en-de's vocabulary, a typical OPUS-MT size
SENTENCE = "el gato negro duerme en la casa de mi madre porque hace frío"
TARGET = "the black cat sleeps in my mother's house because it is cold"
MARIAN_OPTIONS = dict(activation="swish", pe_layout="halves", final_logits_bias=True, tie_embeddings=True,
                      tie_output=True)


def base_tokenizer() -> Tokenizer:
    """A joint word-level Tokenizer of exactly VOCAB_SIZE pieces that knows SENTENCE's and TARGET's words."""
    known = sorted(set(SENTENCE.split()) | set(TARGET.split()))
    filler = [w for w in made_up_words(VOCAB_SIZE) if w not in known][:VOCAB_SIZE - 4 - len(known)]
    lines = [" ".join(known)] + [" ".join(filler[i:i + 16]) for i in range(0, len(filler), 16)]
    tokenizer = Tokenizer.train(lines, [], vocab_size=VOCAB_SIZE, model_type="word", joint=True)
    assert tokenizer.src_vocab_size == VOCAB_SIZE, tokenizer
    return tokenizer


def build_base_checkpoint(directory: Path, seed: int = 0) -> Path:
    """Save a random base-size, Marian-like model under `directory` / NAME; returns its path."""
    tokenizer = base_tokenizer()
    cfg = preset("base", src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, **MARIAN_OPTIONS)
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    with torch.no_grad():                # Marian's bias is trained, not zero: a random one is nearer
        model.generator.proj.bias.normal_(0.0, 0.1)
    card = {"model_card": {"source": "random weights (tests/support/base_model.py)", "license": None,
                           "languages": ["es", "en"], "parameters": sum(p.numel() for p in model.parameters()),
                           "domain": "none: random weights"}}
    return save_checkpoint(Path(directory) / NAME, model, tokenizer, dtype=torch.float16, card=card,
                           meta={"name": NAME, "src_lang": "es", "tgt_lang": "en",
                                 "training": {"dataset": "none (random weights)", "preset": "base"}})


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
