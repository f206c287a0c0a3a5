"""A gold pair as the model reads it: piece ids, and which word each piece belongs to.

The model reads each side as its words joined by single spaces. Each word is encoded on its own and
the pieces are concatenated: sentencepiece (both tokenizer kinds here) never joins pieces across a
space, so this is the sentence's own segmentation, and every piece belongs to exactly one gold word
(the same reading as explorer.text.word_pieces); a multilingual model's language tag comes first on
each side, in no word, as the sentence's own encoding puts it there. A word the tokenizer turns into no
piece at all, or a side longer than the model's max_len, makes the pair unusable: it is skipped and
counted, not guessed.

Attention rows and columns come at piece level; explorer.inspection.attention_stats.word_matrix
turns them into word-level scores with these groups (target rows averaged, source columns summed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from explorer.studies.align.gold import GoldPair
from explorer.decoding.core import special_ids
from explorer.decoding.translate import word_ids as pieces_of_word


@dataclass(frozen=True)
class ModelPair:
    gold: GoldPair
    src_ids: list[int]                # pieces + EOS (the encoder input)
    out_ids: list[int]                # pieces + EOS (the forced decoder output)
    src_groups: list[list[int]]       # per source word, its piece positions in src_ids
    tgt_groups: list[list[int]]       # per target word, its piece positions in out_ids


class Unusable(ValueError):
    """A pair the model cannot read as its words (a word without pieces, too long)."""


def _pieces(tokenizer, words: Sequence[str], side: str) -> tuple[list[int], list[list[int]]]:
    """A side's ids and word groups: a multilingual tokenizer's language tag first, in no word (the
    target's is the tag decoding forces first), then each word's pieces."""
    ids: list[int] = [int(i) for i in tokenizer.encode("", side=side)]
    groups: list[list[int]] = []
    for word in words:
        word_ids = pieces_of_word(tokenizer, word, side)
        if not word_ids:
            raise Unusable(f"the {side} word {word[:30]!r} has no pieces under this tokenizer")
        groups.append(list(range(len(ids), len(ids) + len(word_ids))))
        ids += word_ids
    return ids, groups


def model_pair(model, tokenizer, pair: GoldPair) -> ModelPair:
    """The pair's ids and word groups; Unusable if it cannot be read word for word."""
    eos, max_len = special_ids(model).eos, model.cfg.max_len
    src, src_groups = _pieces(tokenizer, pair.src, "src")
    out, tgt_groups = _pieces(tokenizer, pair.tgt, "tgt")
    if len(src) + 1 > max_len or len(out) + 1 > max_len:
        raise Unusable(f"{len(src)} source / {len(out)} target pieces: more than the model's max_len {max_len}")
    return ModelPair(pair, src + [eos], out + [eos], src_groups, tgt_groups)


def model_pairs(model, tokenizer, gold: Sequence[GoldPair]) -> tuple[list[ModelPair], list[int]]:
    """(usable pairs, indices of the skipped ones) in file order."""
    usable, skipped = [], []
    for k, pair in enumerate(gold):
        try:
            usable.append(model_pair(model, tokenizer, pair))
        except Unusable:
            skipped.append(k)
    return usable, skipped
