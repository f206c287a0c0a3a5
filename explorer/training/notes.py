"""Plain-language notes for results that look like failures but are what the settings imply.

Why: a fine-tune on pairs of three words logged "BLEU 0.00 chrF 100.00 exact 1.000" and drew a flat
BLEU curve at 0 with no word of why, and a run with fewer steps than its warm-up was accepted
silently although its learning rate never reaches the planned peak. The trainer prints these notes
in its log and the Train page shows them beside the curves and the form; each is written once, here.
"""
from __future__ import annotations

from typing import Sequence

BLEU_ORDER = 4      # sacrebleu's default: the geometric mean of 1- to 4-gram precisions


def short_references(references: Sequence[str]) -> float:
    """The share of references with fewer than BLEU_ORDER words (0 when there are none)."""
    if not references:
        return 0.0
    return sum(len(r.split()) < BLEU_ORDER for r in references) / len(references)


def zero_bleu_note(bleu: float, chrf: float, references: Sequence[str] = ()) -> str | None:
    """Why BLEU is 0 when chrF is not, or None when there is nothing to explain."""
    if bleu > 0 or chrf <= 0:
        return None
    share = short_references(references)
    many = f" ({share:.0%} of these references are)" if references else ""
    return (f"BLEU is 0 here by construction, not because the translations are wrong: corpus BLEU multiplies "
            f"the 1- to {BLEU_ORDER}-gram precisions, and a sentence shorter than {BLEU_ORDER} words has no "
            f"{BLEU_ORDER}-gram{many}. chrF (character n-grams) and exact match measure such short sentences.")


def best_dev_text(bleu: float, step: int, chrf: float | None = None, chrf_step: int | None = None,
                  references: Sequence[str] = ()) -> str:
    """The log's last word on the dev scores: the best BLEU and, when known, the best chrF; a best BLEU of
    0 beside a chrF above 0 says why (zero_bleu_note's reason, short), so a run on 3-word pairs does not end
    on a bare "best dev BLEU 0.00"."""
    text = f"best dev BLEU {bleu:.2f} at step {step}"
    if chrf is None:
        return text
    text += f", best dev chrF {chrf:.2f} at step {chrf_step}"
    if bleu <= 0 < chrf:
        share = short_references(references)
        many = f"; {share:.0%} of the dev references are" if references else ""
        text += (f" (BLEU is 0 by construction, not a failure: a sentence shorter than {BLEU_ORDER} words has no "
                 f"{BLEU_ORDER}-gram{many}; chrF measures them)")
    return text


def warmup_note(steps: int, warmup: int) -> str | None:
    """A warning when a run stops before its warm-up ends (the rate never reaches its peak), else None."""
    if steps >= warmup:
        return None
    return (f"{steps:,} training steps is fewer than the {warmup:,} warm-up steps: the learning rate is still "
            f"rising when training stops and reaches only {steps / warmup:.0%} of its planned peak. Lower the "
            "warm-up below the number of steps, or train for longer.")
