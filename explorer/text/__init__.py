"""Text <-> token ids: the sentencepiece tokenizer and the special ids."""
