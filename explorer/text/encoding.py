"""Text -> the id sequences the model reads and writes: where EOS and BOS go, and how long they may be.

The tokenizer returns pieces only; this module is the one place that adds the special ids and cuts
to the model's max_len, so the trainer, the decoder, the evaluator and the app feed the model the
same sequences:

    source      pieces + EOS                          what the encoder reads   (<= max_len)
    output      pieces + EOS                          what the decoder writes  (<= max_len)
    target      BOS + pieces + EOS                    a training pair's target (<= max_len): its
                                                      [:-1] is the decoder input, its [1:] the labels
    decoder input of an output: BOS + output[:-1]     (teacher forcing: position i predicts output[i])

BOS here is the model's decoder start id and EOS its eos id: each function takes `ids`, a
special.SpecialIds (a model's is `model.cfg.special`), defaulting to this project's constants.
The tokenizer only needs encode(text, side).
"""
from __future__ import annotations

from typing import Sequence

from explorer.text.special import DEFAULT_IDS, SpecialIds


def with_eos(ids: Sequence[int], max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """ids cut so that ids + EOS fits in max_len, then EOS."""
    return [int(i) for i in ids][:max_len - 1] + [special.eos]


def source_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """The encoder input of `text`: its source pieces + EOS, at most max_len ids."""
    return with_eos(tokenizer.encode(text, side="src"), max_len, special)


def output_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """`text` as a decoder output (a reference to score or trace): target pieces + EOS, at most max_len."""
    return with_eos(tokenizer.encode(text, side="tgt"), max_len, special)


def target_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """A training target: BOS + target pieces + EOS, at most max_len ids in all."""
    return [special.start] + output_ids(tokenizer, text, max_len - 1, special)


def decoder_inputs(out_ids: Sequence[int], special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """What the decoder reads while it writes `out_ids` (teacher forcing): BOS + out_ids[:-1]."""
    return [special.start] + [int(t) for t in out_ids][:-1]
