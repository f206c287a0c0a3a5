"""A minimal pair: two sources that differ in one word, and the output token where their translations
part (what activation patching measures; explorer.studies.patching.runs).

Patching swaps activations position by position, so the two sources must have the same number of
pieces: a word swapped for one of the same length in pieces. Both are translated greedily; the first
output position where the translations differ is the one measured, with the shared output before it
forced as the decoder's input in every run, so the clean and corrupted runs differ only in the source.
On a multilingual model (M2M100, NLLB) both translations start with the target-language tag, given as
greedy decoding gives it (`given`, decoding.core.with_given): the shared prefix then opens with the tag, the
first target token every run reads, as in the translation the model makes.
Everything that makes a pair unusable is a ValueError with a message a user can act on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from torch import nn

from explorer.decoding.core import special_ids
from explorer.decoding.translate import decode, encode_source, forced_target
from explorer.studies.common.sentences import GREEDY

PAIR_DECODING = GREEDY          # the translations compared: greedy, at most 1.5 x source + 10 tokens


@dataclass(frozen=True)
class MinimalPair:
    clean_src: list[int]            # source ids, EOS included
    corrupt_src: list[int]          # as many ids, different at `changed`
    changed: list[int]              # the source positions where they differ (0-based)
    prefix: list[int]               # output ids both translations share before they part
    clean_token: int                # what the clean translation writes next
    corrupt_token: int              # what the corrupted one writes there instead
    clean_output: list[int]         # both greedy translations, EOS included when finished
    corrupt_output: list[int]
    given: int = 0                  # how many tokens of prefix were given, not chosen (a target-language tag)

    @property
    def position(self) -> int:
        """The target position measured (0-based): the first where the translations differ."""
        return len(self.prefix)


def first_difference(clean: Sequence[int], corrupt: Sequence[int]) -> int | None:
    """The first output position where two translations part; None when one is the start of the other
    (alike, or one cut at the length limit): no output token tells them apart."""
    return next((i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b), None)


def pair_from_ids(model: nn.Module, clean_src: Sequence[int], corrupt_src: Sequence[int], *,
                  given: Sequence[int] = ()) -> MinimalPair:
    """The pair of two id sequences (EOS included). ValueError when their lengths differ, when they are
    the same, or when both translate alike (no output token to measure). `given`: the tokens every output
    starts with (translate.forced_target of the tokenizer)."""
    clean_src, corrupt_src = [int(t) for t in clean_src], [int(t) for t in corrupt_src]
    if len(clean_src) != len(corrupt_src):
        raise ValueError(f"the two sources must have the same number of pieces (patching swaps them position by "
                         f"position): the clean one has {len(clean_src)}, the corrupted one {len(corrupt_src)}; "
                         "swap a word for one that is as many pieces")
    changed = [i for i, (a, b) in enumerate(zip(clean_src, corrupt_src)) if a != b]
    if not changed:
        raise ValueError("the two sources are the same pieces: change one word to make a minimal pair")
    clean, corrupt = (d.best.ids for d in decode(model, [clean_src, corrupt_src], PAIR_DECODING, given=given))
    first = first_difference(clean, corrupt)
    if first is None:
        raise ValueError("both sources translate to the same output, so no output token tells them apart; "
                         "choose a word whose change changes the translation")
    return MinimalPair(clean_src=clean_src, corrupt_src=corrupt_src, changed=changed, prefix=clean[:first],
                       clean_token=clean[first], corrupt_token=corrupt[first], clean_output=clean,
                       corrupt_output=corrupt, given=len(given))


def make_pair(model: nn.Module, tokenizer, clean: str, corrupt: str) -> MinimalPair:
    """The pair of two texts (see pair_from_ids); an empty or over-long text is a ValueError too."""
    ids = []
    for name, text in (("clean", clean), ("corrupted", corrupt)):
        src, truncated, reason = encode_source(tokenizer, text, model.cfg.max_len, special_ids(model))
        if not src or truncated:
            raise ValueError(f"the {name} source cannot be used: {reason}")
        ids.append(src)
    return pair_from_ids(model, *ids, given=forced_target(tokenizer))
