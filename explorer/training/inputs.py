"""Turning a corpus into the trainer's batches: tokenizer, id sequences, token-count batches.

The batch order of epoch e is a pure function of (seed, e), so resuming at (epoch, batch index)
replays exactly the batches an uninterrupted run would have seen.
"""
from __future__ import annotations

from pathlib import Path

import torch

from explorer.config import TrainConfig
from explorer.data.batching import make_batches, pad_batch
from explorer.data.encoded import EncodedSplit
from explorer.files.names import RUN_TOKENIZER
from explorer.text.tokenizer import Tokenizer
from explorer.training.memory import SetupRefused


def prepare_tokenizer(cfg: TrainConfig, corpus, run_dir: Path, init_tokenizer: Tokenizer | None) -> Tokenizer:
    """Fine-tuning keeps the checkpoint's tokenizer; a fresh run trains one (once per run dir)."""
    if init_tokenizer is not None:
        return init_tokenizer
    tok_dir = Path(run_dir) / RUN_TOKENIZER
    try:
        return Tokenizer.load(tok_dir)
    except Exception:
        pass
    try:
        return Tokenizer.train([p.src for p in corpus.train], [p.tgt for p in corpus.train], tok_dir,
                               vocab_size=cfg.vocab_size, model_type=cfg.tokenizer_type, joint=True)
    except ValueError as err:             # a --vocab-size this corpus cannot have: before the first step
        raise SetupRefused(f"the {cfg.tokenizer_type} tokenizer: {err}") from None


class BatchPlan:
    """Token-count batches for every epoch, sharded across DDP ranks."""

    def __init__(self, split: EncodedSplit, cfg: TrainConfig, rank: int = 0, world: int = 1):
        self.split, self.cfg, self.rank, self.world = split, cfg, rank, world
        self._cache: dict[int, list[list[int]]] = {}

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        if epoch not in self._cache:
            batches = make_batches(self.split.lengths(), self.cfg.batch_tokens, seed=self.cfg.seed + epoch)
            usable = len(batches) - len(batches) % self.world if self.world > 1 else len(batches)
            self._cache = {epoch: batches[:usable][self.rank::self.world]}
        return self._cache[epoch]

    def steps_per_epoch(self) -> int:
        return max(1, len(self.epoch_batches(0)) // self.cfg.accum_steps)

    def tensors(self, index: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        src = pad_batch([self.split.src[i] for i in index], self.split.pad_id).to(device)  # [B, S]
        tgt = pad_batch([self.split.tgt[i] for i in index], self.split.pad_id).to(device)  # [B, T+1]
        return src, tgt[:, :-1], tgt[:, 1:]                                          # src, tgt_in, tgt_out
