"""Parallel corpora: the Spanish-English Bible, generated number words, users' own files.

`load_corpus(spec)` is the one entry point (see splits.py); batching.py turns token lengths into
token-count batches for the trainer.
"""
from explorer.data.types import DataError, Pair, ParallelCorpus
from explorer.data.splits import corpus_name, load_corpus, split_held_out

__all__ = ["DataError", "Pair", "ParallelCorpus", "corpus_name", "load_corpus", "split_held_out"]
