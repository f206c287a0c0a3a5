"""Dictionaries in place of the FFNs (or residual streams) they stand for, and what the model loses: the
measure of whether a layer's features carry what the layer computes, not only what its output looks like.

    CE recovered = (CE_mean - CE_spliced) / (CE_mean - CE_model)

CE is the summed cross-entropy of the forced targets per target token (teacher-forced, pads left out);
CE_mean has every FFN's output replaced by its mean over the same tokens (mean ablation, the usual
floor: Makelov et al. 2024, Marks et al. 2024 report recovered loss against it), CE_spliced every FFN
replaced by its transcoder at once, so errors compound through the layers as they would in a graph.
1.0: the dictionaries lose nothing; 0.0: no better than knowing each FFN's average output.

A residual-stream site is spliced the same way: the layer's output replaced by its SAE's reconstruction
of it, and mean-ablated by the stream's mean there.

A splice is a forward hook (sites.hook) that returns the replacement from what the dictionary reads (the
FFN's own input, or the stream), so it holds on every path the model takes (teacher-forced passes and
cached greedy decoding alike) and is removed on exit.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from explorer.decoding.core import special_ids
from explorer.studies.common.sentences import SentenceSet, teacher_batches
from explorer.studies.features.sites import hook

Replacement = Callable[[torch.Tensor], torch.Tensor]          # what the site reads [..., d] -> its output [..., d]


@contextmanager
def spliced(model, replacements: dict[str, Replacement]) -> Iterator[None]:
    """Within the block, each site's output is replacements[site](what its dictionary reads)."""
    handles = []
    try:
        for site, replace in replacements.items():
            handles.append(hook(model, site, lambda reads, output, replace=replace: replace(reads).to(output.dtype)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def by_transcoder(tc) -> Replacement:
    return lambda x: tc(x.float())                                               # [..., d]


def by_mean(mean: torch.Tensor) -> Replacement:
    return lambda x: mean.to(x.dtype).expand(*x.shape[:-1], mean.shape[-1])       # [..., d]


@torch.no_grad()
def target_ce(model, sents: SentenceSet, batch_size: int = 32, tick=None) -> float:
    """Mean cross-entropy (nats) per forced target token over the set, teacher-forced."""
    pad = special_ids(model).pad
    total, tokens = 0.0, 0
    for idx, src, tgt_in, tgt_out in teacher_batches(model, sents, batch_size):
        logits = model.logits(src, tgt_in)                                        # [B, T, V]
        total += float(F.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(), ignore_index=pad,
                                       reduction="sum"))
        tokens += int((tgt_out != pad).sum())
        if tick is not None:
            tick(len(idx))
    return total / max(tokens, 1)


@torch.no_grad()
def mean_outputs(model, sents: SentenceSet, names: list[str], batch_size: int = 32) -> dict[str, torch.Tensor]:
    """Each site's output (the FFN's, or the stream) averaged over the set's real positions: the mean
    ablation's values. A decoder position is real when it predicts a forced token (tgt_out not pad): the
    decoder input's pad test counted the end token read at a shorter sentence's padded slot, and dropped
    position 0 of a model whose start id is its pad id (Marian's)."""
    pad = special_ids(model).pad
    seen: dict[str, torch.Tensor] = {}
    sums = {site: torch.zeros(model.cfg.d_model, dtype=torch.float64) for site in names}
    counts = dict.fromkeys(names, 0)
    handles = [hook(model, site, lambda _reads, output, site=site: seen.__setitem__(site, output.detach()))
               for site in names]
    try:
        for _idx, src, tgt_in, tgt_out in teacher_batches(model, sents, batch_size):
            model.logits(src, tgt_in)
            for site in names:
                real = (src if site.startswith("encoder.") else tgt_out) != pad                   # [B, L]
                sums[site] += seen[site][real].double().sum(0)                                   # [d]
                counts[site] += int(real.sum())
    finally:
        for handle in handles:
            handle.remove()
    return {site: (sums[site] / max(counts[site], 1)).float() for site in names}


def recovered(ce_mean: float, ce_spliced: float, ce_model: float) -> float:
    return (ce_mean - ce_spliced) / max(ce_mean - ce_model, 1e-12)
