"""A checkpoint the size of the paper's base Transformer, with random weights, for the app's tests.

Imported OPUS-MT (Marian) models are base-size: 6+6 layers x 8 heads, d_model 512, d_ff 2048 and a
~58k-piece vocabulary. Pages that read well on the shipped 4-head, 3+3-layer models may not at 48
heads per kind (grids, the beam tree, bertviz's size limits), and the vocabulary sets the cost of
every decoding step, so this checkpoint has those sizes and Marian's options (swish, sinusoids in
halves, a final logits bias, a tied output projection), saved as the app loads it: float16, with
this project's own sentencepiece Tokenizer. Its special ids stay the Tokenizer's (pad 0, unk 1,
bos 2, eos 3), which a native tokenizer cannot change.

The vocabulary is the real size: a word-level sentencepiece model over VOCAB_SIZE - 4 made-up words
(one line each, trained in a fraction of a second) plus the words of SENTENCE, so the sentence
encodes to known pieces. Built once per test session in a temporary folder (~150 MB on disk).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from explorer.config import preset
from explorer.model import Transformer
from explorer.store.checkpoint import save_checkpoint
from explorer.text.tokenizer import Tokenizer

NAME = "base-random"
VOCAB_SIZE = 58101                   # opus-mt-en-de's vocabulary, a typical OPUS-MT size
SENTENCE = "el gato negro duerme en la casa de mi madre porque hace frío"
TARGET = "the black cat sleeps in my mother's house because it is cold"
MARIAN_OPTIONS = dict(activation="swish", pe_layout="halves", final_logits_bias=True, tie_embeddings=True,
                      tie_output=True)


def made_up_words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    found: set[str] = set()
    while len(found) < n:
        found.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))))
    return sorted(found)


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


@pytest.fixture(scope="session")
def base_models_dir(tmp_path_factory) -> Path:
    """A models folder ($EXPLORER_MODELS_DIR) holding one base-size checkpoint, NAME."""
    folder = tmp_path_factory.mktemp("base-models")
    build_base_checkpoint(folder)
    return folder
