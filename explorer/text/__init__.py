"""Text <-> token ids: the sentencepiece tokenizer, the special ids, and where BOS/EOS go (encoding)."""
