"""Which test pair to open the app on: one the model translates well, chosen by a rule, not by hand.

A first visit should show what the model can do, not a sentence picked once by a person (which
goes stale when the checkpoint changes) nor simply the first line of test.tsv (bible-es-en's first
test verse has no English reference at all). The rule: among the first SHOWCASE_PAIRS test pairs
that have a reference, the one whose beam-5 translation (the Translate page's default decoding)
has the highest sentence chrF against its reference; the earliest wins a tie. Beam search runs in
length-sorted batches (evaluation.scores.translate_ids), about a second for the shipped models.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sacrebleu
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import model_device, special_ids
from explorer.decoding.translate import encode_source
from explorer.evaluation.scores import translate_ids

SHOWCASE_PAIRS = 24                  # test pairs looked at: enough to find a good one, cheap on a CPU
SHOWCASE_DECODING = DecodeConfig(strategy="beam", beam_size=5, n_best=1)


@dataclass(frozen=True)
class Showcase:
    index: int                       # into the pairs given
    chrf: float                      # sentence chrF (0-100) of its translation against its reference
    translation: str


def best_translated(model: nn.Module, tokenizer, pairs: Sequence[tuple[str, str]], n: int = SHOWCASE_PAIRS,
                    cfg: DecodeConfig = SHOWCASE_DECODING) -> Showcase | None:
    """The best-translated of the first `n` (source, reference) pairs with a non-empty source and
    reference, by sentence chrF of cfg's translation; None when no pair qualifies."""
    special = special_ids(model)
    chosen, src_ids = [], []
    for i, (src, ref) in enumerate(pairs):
        if len(chosen) == n:
            break
        ids, _, _ = encode_source(tokenizer, src, model.cfg.max_len, special) if ref.strip() else ([], False, "")
        if ids:
            chosen.append(i)
            src_ids.append(ids)
    if not chosen:
        return None
    outputs = translate_ids(model, src_ids, cfg, model_device(model), batch_size=8)
    best: Showcase | None = None
    for i, out in zip(chosen, outputs):
        text = tokenizer.decode(out, side="tgt")
        chrf = sacrebleu.sentence_chrf(text, [pairs[i][1]]).score
        if best is None or chrf > best.chrf:
            best = Showcase(index=i, chrf=chrf, translation=text)
    return best
