"""A Transformer's structure (parameter names and shapes) for checks that never read its values.

Listing checkpoints (is this safetensors header the model its config describes?) and sizing a
training run (how many parameters?) both need the structure only. `parameter_count` answers the
second question from the config alone, so a weights file can be checked against its config.json
before any tensor is made.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from explorer.config import ModelConfig
from explorer.model.transformer import Transformer


class _NoInit(TorchFunctionMode):
    """Skips the in-place random/constant initialisers (normal_, uniform_, ...) of torch.nn.init.

    The skeleton's values are never read, only its names and shapes.
    """

    SKIPPED = frozenset({"normal_", "uniform_", "zero_", "fill_", "ones_", "zeros_", "constant_",
                         "xavier_uniform_", "kaiming_uniform_", "trunc_normal_"})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")          # torch.nn.init passes tensor=...
        if getattr(func, "__name__", "") in self.SKIPPED and isinstance(target, torch.Tensor):
            return target
        return func(*args, **kwargs)


def model_skeleton(cfg: ModelConfig) -> Transformer:
    """The model's structure (names and shapes), its weights left uninitialised.

    Not on the meta device: there, the first random or arange op imports torch._dynamo (its meta
    kernels are Python decompositions behind a dynamo guard), ~1.2 s of every cold app start.
    Uninitialised CPU tensors cost an allocation the OS does not even back until written.
    """
    with _NoInit():
        return Transformer(cfg)


def parameter_count(cfg: ModelConfig) -> int:
    """How many values a model of `cfg` stores (a tied matrix once), computed without building it.

    A checkpoint's config.json is checked against its weights file with this before anything is
    allocated: a config claiming d_model = 2^31 must fail as "damaged", not in the allocator.
    tests/test_checkpoint_limits.py keeps it equal to model_skeleton(cfg).num_parameters() for
    every ModelConfig option; a new option changes both.
    """
    d, f = cfg.d_model, cfg.d_ff
    attention = 4 * (d * d + d)                         # w_q, w_k, w_v, w_o, each with a bias
    ffn = (d * f + f) + (f * d + d)                     # w_1, w_2
    norm = 2 * d                                        # LayerNorm gain and bias
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    final_norms = 2 * norm if cfg.norm_first else 0
    positions = 2 * cfg.max_len * d if cfg.positions == "learned" else 0     # sinusoidal: a buffer, not stored
    vocab = cfg.src_vocab_size * d                      # source embedding
    if not cfg.tie_embeddings:
        vocab += cfg.tgt_vocab_size * d                 # target embedding of its own
    if not cfg.output_tied:
        vocab += cfg.tgt_vocab_size * d                 # output projection of its own
    logits_bias = cfg.tgt_vocab_size if cfg.final_logits_bias else 0
    return (cfg.n_encoder_layers * encoder_layer + cfg.n_decoder_layers * decoder_layer + final_norms
            + positions + vocab + logits_bias)
