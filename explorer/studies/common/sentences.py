"""The sentences a head lab measures on, and the two passes it makes over them.

A head's role or importance is a claim about a test *set*, not one sentence (Voita et al. 2019 and
Michel et al. 2019 both average over a corpus), so everything in explorer.studies.heads runs on a
SentenceSet: source ids, the forced output (the reference, or the model's own greedy output), and
the reference text BLEU is scored against. Two passes are needed, written once here:
* teacher_batches: padded teacher-forced batches (the statistics and the gradients read them);
* greedy_texts: greedy decoding, optionally with heads removed (single-head removal, pruning).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import special_ids
from explorer.decoding.translate import decode, forced_target
from explorer.runtime.progress import Cancelled
from explorer.text.encoding import output_ids, source_ids

FORCED = ("reference", "output")          # what the decoder is forced to read in the teacher-forced passes
GREEDY = DecodeConfig(strategy="greedy", max_len_a=1.5, max_len_b=10)  # every BLEU of the head lab:
# greedy, at most 1.5 x source + 10 tokens (a heavily pruned model that babbles stops there)


@dataclass(frozen=True)
class SentenceSet:
    src: list[list[int]]          # encoder inputs, EOS included
    out: list[list[int]]          # forced decoder outputs, EOS included (reference or greedy output)
    refs: list[str]               # reference texts (what BLEU and chrF compare with)
    forced: str                   # "reference" | "output"

    def __len__(self) -> int:
        return len(self.src)


def build_sentences(model: nn.Module, tokenizer, pairs: Sequence, n: int, forced: str = "reference",
                    batch_size: int = 32) -> SentenceSet:
    """The first n pairs (objects with .src and .tgt text) as a SentenceSet; with forced="output" the
    forced output is the model's own greedy translation (EOS appended where it was cut off)."""
    if forced not in FORCED:
        raise ValueError(f"forced must be one of {FORCED}, not {forced!r}")
    pairs = list(pairs)[:n]
    if not pairs:
        raise ValueError("no sentences to measure on")
    special, max_len = special_ids(model), model.cfg.max_len
    src = [source_ids(tokenizer, p.src, max_len, special) for p in pairs]
    if forced == "reference":
        out = [output_ids(tokenizer, p.tgt, max_len, special) for p in pairs]
    else:
        out = [(ids + [special.eos])[:max_len]
               for ids in greedy_ids(model, src, (), batch_size, given=forced_target(tokenizer))]
    return SentenceSet(src=src, out=out, refs=[p.tgt for p in pairs], forced=forced)


def teacher_batches(model: nn.Module, sents: SentenceSet,
                    batch_size: int = 32) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(sentence indices, src [B, S], decoder inputs [B, T], forced outputs [B, T]) in length order,
    padded with the model's pad id; the decoder input is the start id + outputs[:-1]."""
    special = special_ids(model)
    device = next(model.parameters()).device
    order = sorted(range(len(sents)), key=lambda i: (len(sents.src[i]), len(sents.out[i])))
    for first in range(0, len(order), batch_size):
        idx = order[first:first + batch_size]
        src = _pad([sents.src[i] for i in idx], special.pad).to(device)                  # [B, S]
        tgt_out = _pad([sents.out[i] for i in idx], special.pad).to(device)              # [B, T]
        start = torch.full((len(idx), 1), special.start, dtype=torch.long, device=device)  # [B, 1]
        tgt_in = torch.cat([start, tgt_out[:, :-1]], dim=1)                                # [B, T]
        yield idx, src, tgt_in, tgt_out


def _pad(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad, dtype=torch.long)               # [B, W]
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


@torch.no_grad()
def length_batches(src: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """Indices of `src` in batches of `batch_size`, shortest sources first: how the greedy decodes of the
    set batch (sentences of like length share a batch, so a batch pads little)."""
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    return [order[first:first + batch_size] for first in range(0, len(order), batch_size)]


def greedy_ids(model: nn.Module, src: Sequence[Sequence[int]], ablate: Iterable[Sequence] = (),
               batch_size: int = 32, stop: Callable[[], bool] | None = None,
               given: Sequence[int] = ()) -> list[list[int]]:
    """Greedy output ids (no EOS) of each source in input order, with `ablate` heads removed
    ((kind, layer, head), 0-based) through decoding's own ablation. `stop()` is asked before each
    batch (a cancelled job stops within one batch, not one whole decode of the set). `given`: the
    tokens every output starts with (a multilingual tokenizer's target tag: translate.forced_target)."""
    heads = list(ablate)
    out: list[list[int]] = [[] for _ in src]
    for idx in length_batches(src, batch_size):
        if stop is not None and stop():
            raise Cancelled()
        for i, d in zip(idx, decode(model, [list(src[i]) for i in idx], GREEDY, ablate=heads, given=given)):
            out[i] = d.best.output_ids
    return out


def greedy_texts(model: nn.Module, tokenizer, sents: SentenceSet, ablate: Iterable[Sequence] = (),
                 batch_size: int = 32, stop: Callable[[], bool] | None = None) -> list[str]:
    """Detokenized greedy translations of the set's sources (heads in `ablate` removed)."""
    given = forced_target(tokenizer)
    return [tokenizer.decode(ids, side="tgt") for ids in greedy_ids(model, sents.src, ablate, batch_size, stop, given)]


def token_counts(tokenizer, texts: Iterable[str], side: str) -> Counter:
    """How often each piece id occurs in `texts` (one side of a corpus): the frequencies behind
    Voita et al.'s rare-word heads."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(tokenizer.encode(text, side=side))
    return counts


def rarest_key(ids: Sequence[int], counts: Counter, skip: set[int]) -> int | None:
    """Index of the least frequent token of a sentence (special ids skipped; the first on ties;
    unseen ids count 0); None when only special tokens are left."""
    best, best_count = None, None
    for i, t in enumerate(ids):
        if int(t) in skip:
            continue
        c = counts.get(int(t), 0)
        if best_count is None or c < best_count:
            best, best_count = i, c
    return best
