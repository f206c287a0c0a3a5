"""Models built for measuring (no model can be downloaded here): a random checkpoint the size of the
models users open, for benchmarks and tests alike.

Imported OPUS-MT (Marian) models are base-size: 6+6 layers x 8 heads, d_model 512, d_ff 2048 and a
~58k-piece vocabulary; the vocabulary, not the text, sets the cost of every decoding step. NAME
("base-random", build_base_checkpoint) has those sizes and Marian's options (swish, sinusoids in
halves, a non-zero final-logits bias, tied embeddings), set by hand, with this project's own
sentencepiece Tokenizer: a word-level model over VOCAB_SIZE - 4 made-up words plus the words of
SENTENCE and TARGET, so its special ids are the defaults (pad 0, unk 1, bos 2, eos 3). Random weights
(seeded) cost what trained ones cost per step, but a random model's greedy outputs run to the length
limit, so decoding figures measured on it are upper bounds.

A helper, not a benchmark (no main): benchmarks/analyses.py and benchmarks/gpu_analyses.py measure on
this checkpoint, and the tests build their base-size app checkpoint with it (tests/support/base_model.py).
"""
from __future__ import annotations

import random
from pathlib import Path

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
    """n distinct random lower-case words (3 to 10 letters), sorted: a vocabulary's filler."""
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
    card = {"model_card": {"source": "random weights (benchmarks/fixtures.py)", "license": None,
                           "languages": ["es", "en"], "parameters": sum(p.numel() for p in model.parameters()),
                           "domain": "none: random weights"}}
    return save_checkpoint(Path(directory) / NAME, model, tokenizer, dtype=torch.float16, card=card,
                           meta={"name": NAME, "src_lang": "es", "tgt_lang": "en",
                                 "training": {"dataset": "none (random weights)", "preset": "base"}})
