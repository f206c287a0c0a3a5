"""Text <-> token ids: the tokenizers (sentencepiece: tokenizer.py; Marian's vocab.json: vocab_tokenizer.py),
the special ids, and where BOS/EOS go (encoding). `load_tokenizer` reads either kind from a directory."""
from __future__ import annotations

import os


def load_tokenizer(directory: str | os.PathLike):
    """The tokenizer saved in `directory`: a Marian VocabTokenizer where vocab.json is present, else a
    sentencepiece Tokenizer (tokenizer.model, or src.model + tgt.model). Imported here, not at the top,
    so that reading special ids or encoding rules never loads sentencepiece."""
    from explorer.text.vocab_tokenizer import VOCAB_FILE, VocabTokenizer
    if os.path.isfile(os.path.join(directory, VOCAB_FILE)):
        return VocabTokenizer.load(directory)
    from explorer.text.tokenizer import Tokenizer
    return Tokenizer.load(directory)
