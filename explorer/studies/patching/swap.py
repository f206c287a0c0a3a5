"""Suggest a one-word swap that makes a minimal pair out of a sentence.

A swap must keep the piece count (patching works position by position) and should keep the word's
kind ("cat" for "dog", "two" for "one") so the pair asks one question. The model's own source
embeddings say which words it treats alike: the suggestion for a word is its nearest whole-word piece
by cosine similarity of the embedding rows (a word that is one piece, swapped for another one-piece
word). Optionally only swaps that change the translation are kept (a pair whose translations agree has
nothing to measure; explorer.studies.patching.pair refuses it), and those whose two runs part clearly at
the output token measured come first: a gap under WEAK_GAP between the runs' logit differences divides
every cell by a number so small that noise reads as an effect (the Causes page says so under its grids).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from explorer.decoding.core import special_ids
from explorer.decoding.translate import decode, encode_source, forced_target, word_ids
from explorer.studies.patching.pair import PAIR_DECODING, first_difference
from explorer.studies.patching.runs import logit_gap

WORD_START = "\u2581"           # sentencepiece's mark of a piece that begins a word
MAX_CANDIDATES = 24             # swaps tried (translated) before the best are returned
WEAK_GAP = 0.5                  # nats between the two runs' logit differences: below, a pair's grids read noise


@dataclass(frozen=True)
class Swap:
    word: int                       # which word of the text (0-based, whitespace-separated)
    old: str
    new: str
    corrupt: str                    # the text with that word swapped
    similarity: float               # cosine of the two words' source embeddings
    gap: float | None = None        # LD_clean - LD_corrupt where the translations part (when they were compared)


def whole_words(tokenizer, vocab_size: int) -> dict[int, str]:
    """Source piece ids that are a whole alphabetic word by themselves, with the word."""
    found = {}
    for i in range(vocab_size):
        piece = tokenizer.id_to_piece(i, "src")
        if piece.startswith(WORD_START) and piece[1:].isalpha():
            found[i] = piece[1:]
    return found


def suggest_swaps(model: nn.Module, tokenizer, text: str, n: int = 5, *, must_change: bool = True) -> list[Swap]:
    """Up to `n` swaps of one word of `text`: each word's most similar swap first, then second choices; [] when no word can be swapped.
    `must_change`: keep only swaps whose greedy translation differs from the text's."""
    if not 1 <= int(n) <= MAX_CANDIDATES:
        raise ValueError(f"n must be in [1, {MAX_CANDIDATES}], not {n}")
    words = text.split()
    special = special_ids(model)
    clean_ids, truncated, _ = encode_source(tokenizer, text, model.cfg.max_len, special)
    if not clean_ids or truncated:
        return []
    vocab = whole_words(tokenizer, model.cfg.src_vocab_size)
    table = torch.nn.functional.normalize(model.encoder.embed.lookup.weight.detach().float(), dim=1)   # [V, d]
    ids = torch.tensor(sorted(vocab), device=table.device)                                          # [W]
    candidates = []
    for position, word in enumerate(words):
        pieces = word_ids(tokenizer, word, "src")             # without a multilingual source tag
        if len(pieces) != 1 or pieces[0] not in vocab:
            continue
        similarity = table[ids] @ table[pieces[0]]                                                   # [W]
        rank = 0
        for score, j in zip(*similarity.topk(min(4, len(ids)))):
            new = vocab[int(ids[j])]
            if new.lower() != word.lower():
                corrupt = " ".join(words[:position] + [new] + words[position + 1:])
                candidates.append((rank, Swap(position, word, new, corrupt, float(score))))
                rank += 1
    # each word's best swap first (a choice of words), then the second best of each, ...
    candidates = [swap for _, swap in sorted(candidates, key=lambda c: (c[0], -c[1].similarity))]
    usable = []
    for swap in candidates:                     # same piece count, one position changed
        ids_swapped, cut, _ = encode_source(tokenizer, swap.corrupt, model.cfg.max_len, special)
        if not cut and len(ids_swapped) == len(clean_ids) and ids_swapped != clean_ids:
            usable.append((swap, ids_swapped))
    usable = usable[:MAX_CANDIDATES]
    if must_change and usable:
        outputs = [d.best.ids for d in decode(model, [clean_ids] + [i for _, i in usable], PAIR_DECODING,
                                                 given=forced_target(tokenizer))]
        changed = [(replace(s, gap=_gap(model, clean_ids, i, outputs[0], out)), i)
                   for (s, i), out in zip(usable, outputs[1:]) if out != outputs[0]]
        usable = sorted(changed, key=lambda found: found[0].gap < WEAK_GAP)       # clear ones first, in order
    return [swap for swap, _ in usable[:n]]


def _gap(model: nn.Module, clean_ids: list[int], corrupt_ids: list[int], clean_out: list[int],
         corrupt_out: list[int]) -> float:
    """The pair's logit gap at the first output token where the two translations part (0 when one
    translation, cut at the length limit, is the start of the other: nothing to measure)."""
    first = first_difference(clean_out, corrupt_out)
    if first is None:
        return 0.0
    return logit_gap(model, clean_ids, corrupt_ids, clean_out[:first], clean_out[first], corrupt_out[first])
