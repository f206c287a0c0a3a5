"""What each layer knows: DecoderLens over the encoder's layers and the logit lens over the decoder's.

decoder_lens (a translation per encoder layer, through the project's own decoders), logit_lens (the
generator on each decoder layer's output), kept (activations kept as tensors), job (both over a test
set, as JSON); `python -m explorer lens CHECKPOINT --out FILE.json`.
"""
