"""The encoder-decoder Transformer, written out so every quantity has a name."""
from explorer.model.layers import CapturePoint, sinusoidal_table
from explorer.model.skeleton import model_skeleton, parameter_count
from explorer.model.transformer import DecoderCache, Transformer

__all__ = ["CapturePoint", "DecoderCache", "Transformer", "model_skeleton", "parameter_count", "sinusoidal_table"]
