"""Will a training step fit in memory? The estimate the trainer compares with what is free.

Asked before the first step (a batch of 10^12 tokens used to reach 23 GB and an OOM kill with the
status stuck at "running"): the trainer refuses with the figures instead.
"""
from __future__ import annotations

import torch

from explorer.config import ModelConfig, TrainConfig
from explorer.model import parameter_count
from explorer.runtime import processes
from explorer.runtime.split import local_world_size

class SetupRefused(Exception):
    """Settings that pass validate() but not this corpus or machine (a batch too big for memory)."""


def step_memory_bytes(model_cfg: ModelConfig, tokens: int, seq_len: int) -> int:
    """About how many bytes one training step needs: what the trainer compares with free memory.

    tokens: padded tokens per side of the largest micro-batch; seq_len: its longest sequence.
    Counted in float32 (bf16 autocast needs less, so this errs high). Each term was checked against
    the peak resident size of real CPU steps (tiny and small presets, 2k-48k tokens, vocabularies of
    62-30k): the sum came out 5-20% above the measurement, never below.
      vocabulary  the loss keeps log-probabilities [tokens, V] and its backward builds a gradient of
                  the same size: 2 floats per target token per vocabulary entry
      layers      what each encoder and decoder layer keeps for backward: ~18 d_model + 5 d_ff floats
                  per token (projections, residuals, norms, the feed-forward hidden layer, masks)
      attention   scores, weights, dropout mask and their gradient: 4 floats per head per key per
                  token, in each self- and cross-attention block
      model       weights, gradients and Adam's two moments: 4 floats per parameter
    Micro-batches (accum_steps) run one after another, so they do not add up.
    """
    layers = model_cfg.n_encoder_layers + model_cfg.n_decoder_layers
    attention_blocks = model_cfg.n_encoder_layers + 2 * model_cfg.n_decoder_layers
    vocabulary = 2 * tokens * model_cfg.tgt_vocab_size
    activations = tokens * layers * (18 * model_cfg.d_model + 5 * model_cfg.d_ff)
    attention = 4 * tokens * seq_len * model_cfg.n_heads * attention_blocks
    model = 4 * parameter_count(model_cfg)
    return 4 * (vocabulary + activations + attention + model)


def available_memory_bytes(device: torch.device) -> int | None:
    """Memory a step can still use: free GPU memory, or for the CPU free memory plus what the kernel can
    reclaim (runtime.processes). None when it cannot be read: the memory check is then skipped."""
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    if device.type != "cpu":
        return None
    return processes.available_memory_bytes()


def check_batches(cfg: TrainConfig, plan, train_split, model_cfg: ModelConfig, device: torch.device, dist) -> None:
    """Refuse batches this run cannot use, before the first step finds out the hard way.

    An epoch with fewer batches than accum_steps never makes a step (the loop would look for one
    forever). A step needing more memory than there is gets the process killed mid-step with its
    status still `running`. A batch holds at most the whole corpus, and at least its longest
    sentence. CPU ranks started together share one machine's memory; all ranks take the same
    decision, so none is left waiting for the others.
    """
    batches = len(plan.epoch_batches(0))
    if cfg.accum_steps > batches:
        raise SetupRefused(f"accum_steps {cfg.accum_steps} needs {cfg.accum_steps} batches per epoch; "
                           f"batch_tokens {cfg.batch_tokens} makes {batches}; "
                           "lower --accum-steps or --batch-tokens")
    seq_len = max((max(s, t) for s, t in train_split.lengths()), default=1)
    tokens = min(max(cfg.batch_tokens, seq_len), len(train_split) * seq_len)
    need = step_memory_bytes(model_cfg, tokens, seq_len)
    if device.type == "cpu":
        need *= local_world_size()
    free = available_memory_bytes(device)
    short = free is not None and need > free
    if dist.all_sum([float(short)], device)[0] > 0:
        available = f"{free / 2 ** 30:.1f} GiB" if free is not None else "less on another rank"
        raise SetupRefused(f"batch_tokens {cfg.batch_tokens} needs about {need / 2 ** 30:.1f} GiB per step; "
                           f"{available} available; lower --batch-tokens")
