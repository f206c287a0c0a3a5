"""How well one feature of an encoder dictionary detects a source word: for each word asked about, the best
single feature's F1 at telling the positions of that word (every piece of it) from all others, over the
source pieces of a set of pairs, beside the same figure for the random baseline.

    F1(w, f) = 2 |fires_f ∩ pieces_w| / (|fires_f| + |pieces_w|)

where fires_f are the positions where feature f is non-zero and pieces_w those whose word (studies.common.
words.span_word) is w. A dictionary whose features stand for words scores near 1 on frequent words; one
whose features are random directions fires on mixtures and scores lower. Counted in one pass per
dictionary: each position's k active features joined with its word's index (np.add.at), so the cost is
the encoding, not words x features.

`by="word"` counts word occurrences instead of pieces: an occurrence (a word's span of pieces, as
inspection.attention_stats.piece_words groups them) is one unit, the feature fires on it when it fires on
any of its pieces, and the F1 is the same formula over occurrences. A word of three pieces whose feature
fires on one of them is found every time by word, and a third of the time by piece; which unit a figure
uses is said beside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.data.encoded import encode_pairs
from explorer.inspection.attention_stats import piece_words as word_groups
from explorer.studies.common.words import span_word
from explorer.studies.features.contexts import CHUNK
from explorer.studies.features.sites import every_row


@dataclass(frozen=True)
class Detection:
    words: list[str]                     # the words asked about that occur in the pairs read
    best_f1: np.ndarray                  # [W] the best single feature's F1 per word
    best_feature: np.ndarray             # [W] which feature that is
    positions: np.ndarray                # [W] the word's pieces (by="word": its occurrences) in the pairs read
    precision: np.ndarray                # [W] of the best feature's firings, the share on the word's pieces
    recall: np.ndarray                   # [W] of the word's pieces, the share the best feature fires on
    by: str = "piece"                    # the unit counted: "piece", or "word" (an occurrence of a word)

    @property
    def median(self) -> float:
        return float(np.median(self.best_f1)) if len(self.best_f1) else float("nan")


def piece_words(model, tokenizer, pairs: Sequence) -> tuple[list[list[int]], list[str]]:
    """The pairs' source ids as the model reads them, and each source position's word, in order."""
    src, labels, _ = _read(model, tokenizer, pairs)
    return src, labels


def _read(model, tokenizer, pairs: Sequence) -> tuple[list[list[int]], list[str], np.ndarray]:
    """piece_words, and each source position's word occurrence (a number, counted over all the pairs)."""
    encoded = encode_pairs(tokenizer, pairs, model.cfg.max_len, model.cfg.special)
    labels, occurrence, seen = [], [], 0
    for ids in encoded.src:
        pieces = [tokenizer.id_to_piece(i, "src") for i in ids]
        labels += [span_word(pieces, p) for p in range(len(pieces))]
        for group in word_groups(pieces):
            occurrence += [seen] * len(group)
            seen += 1
    return [list(s) for s in encoded.src], labels, np.array(occurrence, dtype=np.int64)


@torch.no_grad()
def detect(model, tokenizer, pairs: Sequence, site: str, tc, words: Sequence[str], by: str = "piece") -> Detection:
    """The best single feature per word of `words` (those found in the pairs), for the dictionary `tc`,
    counting pieces (`by="piece"`) or word occurrences (`by="word"`)."""
    if not site.startswith("encoder."):
        raise ValueError("word detection reads source words: it needs an encoder site")
    if by not in ("piece", "word"):
        raise ValueError(f"by must be 'piece' or 'word', not {by!r}")
    src, labels, occurrence = _read(model, tokenizer, pairs)
    inputs = every_row(model, src, [[] for _ in src], site).inputs                       # [N, d]
    wanted = {w: i for i, w in enumerate(dict.fromkeys(words))}
    word_of = np.array([wanted.get(w, -1) for w in labels], dtype=np.int64)              # [N]
    if by == "word":                   # one unit per occurrence, whose word is its first piece's
        unit_of = occurrence                                                              # [N]
        word_of = word_of[np.flatnonzero(np.diff(occurrence, prepend=-1))]                # [U]
    else:
        unit_of = np.arange(len(labels), dtype=np.int64)                                  # [N]
    fired = []                                                                            # unit * m + feature
    for first in range(0, len(inputs), CHUNK):
        z = tc.encode(torch.from_numpy(inputs[first:first + CHUNK]))                      # [c, m]
        row, feature = (t.numpy() for t in torch.nonzero(z > 0, as_tuple=True))
        fired.append(unit_of[first + row] * tc.width + feature)
    pairs_fired = np.unique(np.concatenate(fired)) if fired else np.zeros(0, np.int64)    # a unit counted once
    unit, feature = np.divmod(pairs_fired, tc.width)
    fires = np.bincount(feature, minlength=tc.width)                                      # [m]
    labelled = word_of[unit] >= 0
    counts = np.zeros((len(wanted), tc.width), dtype=np.int64)                           # [W, m]
    np.add.at(counts, (word_of[unit[labelled]], feature[labelled]), 1)
    positions = np.bincount(word_of[word_of >= 0], minlength=len(wanted))                # [W]
    present = np.flatnonzero(positions > 0)
    f1 = 2 * counts[present] / np.maximum(fires[None, :] + positions[present, None], 1)   # [W', m]
    names, best = list(wanted), f1.argmax(1)                                               # [W']
    hits = counts[present, best]
    return Detection([names[i] for i in present], f1.max(1), best, positions[present],
                     hits / np.maximum(fires[best], 1), hits / positions[present], by)
