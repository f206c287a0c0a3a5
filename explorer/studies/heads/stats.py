"""Head statistics over a set of sentences: each per-sentence figure, then its mean and spread.

Voita et al. 2019 ("Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting,
the Rest Can Be Pruned", ACL) characterise a head by its *confidence*, the mean over tokens of the
largest attention weight, and by what it attends to: the previous or next token (positional heads),
the least frequent token of the sentence (rare-word heads). This module measures those, plus the
app's usual figures, for every kind, layer and head over a SentenceSet, one teacher-forced forward
per batch. The per-sentence formulas are explorer.inspection.attention_stats's (each formula once):
head_stats for entropy, max weight (= confidence), to_self, to_prev, to_eos and diagonality;
offset_share(+1) for the next position; key_share for the rarest token. A figure a sentence does
not have (no </s> in the source, a one-token map) is NaN there and left out of that head's mean.

The spread is the standard deviation across sentences: a head with share 0.5 on the previous token
in every sentence is a different head from one with 1.0 in half of them and 0 in the rest.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from explorer.decoding.core import special_ids
from explorer.studies.common.sentences import SentenceSet, rarest_key, teacher_batches
from explorer.inspection.attention_stats import boundary_key, head_stats, key_share, offset_share
from explorer.inspection.hooks import capture
from explorer.inspection.trace import ATTENTION_KINDS, KINDS, attention_name
from explorer.runtime.modes import eval_mode
from explorer.runtime.progress import Cancelled
from explorer.runtime.split import ONE, Split

HEAD_STATS = ("entropy", "spread", "confidence", "to_prev", "to_self", "to_next", "to_eos", "to_rare",
              "diagonality")


@dataclass(frozen=True)
class KindStats:
    """One attention kind: per sentence [N, L, H] for each statistic, with mean and std [L, H]."""

    per_sentence: dict[str, np.ndarray]     # stat -> [N, L, H] (NaN where a sentence lacks the figure)
    mean: dict[str, np.ndarray]             # stat -> [L, H]
    std: dict[str, np.ndarray]              # stat -> [L, H]

    @property
    def shape(self) -> tuple[int, int]:
        return self.mean["confidence"].shape


def map_stats(weights: np.ndarray, eos_key: int | None, rare_key: int | None) -> dict[str, float]:
    """Every HEAD_STATS figure of one head's map w[q, k] in one sentence."""
    base = head_stats(weights, eos_key)                                       # attention_stats' formulas
    k = weights.shape[1]
    return {"entropy": base["entropy"],
            "spread": base["entropy"] / np.log(k) if k > 1 else float("nan"),
            "confidence": base["max_weight"], "to_prev": base["to_prev"], "to_self": base["to_self"],
            "to_next": offset_share(weights, 1), "to_eos": base["to_eos"],
            "to_rare": key_share(weights, rare_key), "diagonality": base["diagonality"]}


def summarize(per_sentence: dict[str, np.ndarray]) -> KindStats:
    """Mean and standard deviation across sentences, NaN-aware (NaN only where no sentence counts)."""
    mean, std = {}, {}
    for name, values in per_sentence.items():                                 # [N, L, H]
        counted = np.isfinite(values).sum(axis=0)                             # [L, H]
        filled = np.where(np.isfinite(values), values, 0.0)
        m = filled.sum(axis=0) / np.maximum(counted, 1)                       # [L, H]
        var = (np.where(np.isfinite(values), (values - m) ** 2, 0.0)).sum(axis=0) / np.maximum(counted, 1)
        mean[name] = np.where(counted > 0, m, np.nan)
        std[name] = np.where(counted > 0, np.sqrt(var), np.nan)
    return KindStats(per_sentence=per_sentence, mean=mean, std=std)


def sentence_stats(stacks: dict[str, np.ndarray], eos: dict[str, int | None],
                   rare: dict[str, int | None]) -> dict[str, dict[str, np.ndarray]]:
    """One sentence: {kind: {stat: [L, H]}} from its stacks {kind: [L, H, q, k]}."""
    out = {}
    for kind, stack in stacks.items():
        n_layers, n_heads = stack.shape[:2]
        out[kind] = {name: np.full((n_layers, n_heads), np.nan) for name in HEAD_STATS}
        for layer in range(n_layers):
            for head in range(n_heads):
                for name, value in map_stats(stack[layer, head], eos[kind], rare[kind]).items():
                    out[kind][name][layer, head] = value
    return out


def combine(sentences: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, KindStats]:
    """Per-sentence figures (sentence_stats of each) -> each kind's KindStats over the set."""
    return {kind: summarize({name: np.stack([s[kind][name] for s in sentences])      # [N, L, H]
                             for name in HEAD_STATS})
            for kind in sentences[0]}


def stats_from_maps(maps: list[dict[str, np.ndarray]], eos_keys: list[dict[str, int | None]],
                    rare_keys: list[dict[str, int | None]]) -> dict[str, KindStats]:
    """Statistics from given attention maps: maps[n][kind] is sentence n's stack [L, H, q, k] (the
    test entry point: hand-made patterns go in here). eos_keys / rare_keys: per sentence and kind."""
    return combine([sentence_stats(m, e, r) for m, e, r in zip(maps, eos_keys, rare_keys)])


def sentence_keys(model: nn.Module, src: list[int], out: list[int], counts: dict[str, Counter]) -> tuple[dict, dict]:
    """(boundary key, rarest key) per kind for one sentence: keys are the source for encoder and
    cross attention, the decoder inputs (start id + out[:-1]) for decoder self-attention."""
    special = special_ids(model)
    tgt_in = [special.start] + list(out)[:-1]
    skip = {special.pad, special.eos, special.start}
    eos, rare = {}, {}
    for kind, spec in ATTENTION_KINDS.items():
        keys = src if spec.keys == "src" else tgt_in
        eos[kind] = boundary_key(spec.keys, src, special.eos)
        rare[kind] = rarest_key(keys, counts[spec.keys], skip)
    return eos, rare


@torch.no_grad()
def head_statistics(model: nn.Module, sents: SentenceSet, counts: dict[str, Counter], batch_size: int = 16,
                    tick: Callable[[int], bool] | None = None, split: Split = ONE) -> dict[str, KindStats]:
    """Every kind's statistics over the set, teacher-forced on sents.out. counts: token frequencies
    per side ("src", "tgt") that define each sentence's rarest token. `tick(sentences done)` is
    called after each batch; it returning False stops early (explorer.studies.heads.job's cancellation).
    With a `split` (explorer.runtime.split), each process measures its share of the batches."""
    names = [attention_name(kind, layer) for kind in KINDS
             for layer in range(ATTENTION_KINDS[kind].n_layers(model.cfg))]
    batches = list(teacher_batches(model, sents, batch_size))
    own: dict[int, list] = {}
    done = 0
    with eval_mode(model):
        for b in split.mine(len(batches)):
            idx, src, tgt_in, _ = batches[b]
            with capture(model, names) as trace:
                model(src, tgt_in)                                            # [B, T, V]
            own[b] = []
            for row, i in enumerate(idx):
                lengths = {"src": len(sents.src[i]), "tgt": len(sents.out[i])}
                stacks = {}
                for kind, spec in ATTENTION_KINDS.items():
                    q, k = lengths[spec.queries], lengths[spec.keys]
                    stacks[kind] = np.stack([trace.arrays[attention_name(kind, layer)][row, :, :q, :k]
                                             for layer in range(spec.n_layers(model.cfg))])  # [L, H, q, k]
                eos, rare = sentence_keys(model, sents.src[i], sents.out[i], counts)
                own[b].append((i, sentence_stats(stacks, eos, rare)))
            done += len(idx)
            if tick is not None and tick(min(len(sents), done * split.world)) is False:
                raise Cancelled()
    per_sentence: list[dict] = [None] * len(sents)
    for part in split.gather(own, len(batches)):
        for i, figures in part:
            per_sentence[i] = figures
    return combine(per_sentence)
