"""What a layer represents: learned dictionaries of sparse features on the translation model's FFNs.

sites.py names the FFN sites and collects their input and output rows from the checkpoint's training
pairs; transcoder.py is a TopK transcoder (an FFN's input to its output through k of m latents) and its
training, with the random-decoder baseline; metrics.py scores one on held-out rows (fraction of variance
explained, active latents, dead latents, the busiest latent's density); files.py keeps one in SAELens's
format; splice.py puts every FFN's dictionary in its place at once (CE recovered). For the Features page:
contexts.py keeps where each feature fires in the training pairs, reading.py reads a sentence's features
and measures what a feature does where it fires, steering.py sets a feature to a value, over_training.py reads it
in each checkpoint of its run, detection.py asks which single feature stands for a word. job.py runs them as the command's and the app's studies.
"""
