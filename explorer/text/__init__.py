"""Text <-> token ids: the tokenizers (sentencepiece: tokenizer.py; Marian's vocab.json: vocab_tokenizer.py;
M2M100's and NLLB's, with a language tag per side: multilingual.py),
the special ids, and where BOS/EOS go (encoding). `load_tokenizer` reads either kind from a directory."""
from __future__ import annotations

import os


def load_tokenizer(directory: str | os.PathLike):
    """The tokenizer saved in `directory`: an M2M100/NLLB MultilingualTokenizer where languages.json is
    present, a Marian VocabTokenizer where vocab.json is, else a
    sentencepiece Tokenizer (tokenizer.model, or src.model + tgt.model). Imported here, not at the top,
    so that reading special ids or encoding rules never loads sentencepiece."""
    from explorer.text.multilingual import LANGUAGES_FILE, MultilingualTokenizer
    if os.path.isfile(os.path.join(directory, LANGUAGES_FILE)):
        return MultilingualTokenizer.load(directory)
    from explorer.text.vocab_tokenizer import VOCAB_FILE, VocabTokenizer
    if os.path.isfile(os.path.join(directory, VOCAB_FILE)):
        return VocabTokenizer.load(directory)
    from explorer.text.tokenizer import Tokenizer
    return Tokenizer.load(directory)
