"""Grounded or guessing: what a checkpoint's training pairs say about a sentence it is asked to translate.

A model knows what its training pairs showed it. studies/common/words.py cuts text into the words counted; index.py
builds, from a checkpoint's own training split, how often each word and each pair of neighbouring words
occurs on either side (kept beside the checkpoint, bounded in bytes), with the score threshold calibrated
on the checkpoint's held-out pairs; verdict.py says of one source sentence how much of it the training
data never showed, whether it reads as the model's target language, and whether the translation is
then a guess. The `grounding` command (__main__.py) writes the same verdict for a file of sentences.
"""
