"""Scores: BLEU / chrF / exact match / loss on a split, and comparing checkpoints."""
