"""What a layer represents: learned dictionaries of sparse features on the translation model's FFNs.

sites.py names the FFN sites and collects their input and output rows from the checkpoint's training
pairs; transcoder.py is a TopK transcoder (an FFN's input to its output through k of m latents) and its
training, with the random-decoder baseline; metrics.py scores one on held-out rows (fraction of variance
explained, active latents, dead latents, the busiest latent's density); files.py keeps one in SAELens's
format.
"""
