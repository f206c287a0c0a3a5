"""Activation patching on minimal pairs: which activation carries a word from the source to the output.

pair (two sources differing in one word; the output token where their translations part), runs (the
clean and corrupted runs and batched patched runs, normalised), grids (residual streams by layer and
position, heads by layer for each attention kind, the changed word per encoder depth; averaged over
pairs), swap (a one-word swap suggested from the model's own embeddings), job (JSON);
`python -m explorer patch`.
"""
