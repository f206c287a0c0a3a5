"""Text -> the id sequences the model reads and writes: where EOS and BOS go, and how long they may be.

The tokenizer returns pieces only; this module is the one place that adds the special ids and cuts
to the model's max_len, so the trainer, the decoder, the evaluator and the app feed the model the
same sequences:

    source      pieces + EOS                          what the encoder reads   (<= max_len)
    output      pieces + EOS                          what the decoder writes  (<= max_len)
    target      BOS + pieces + EOS                    a training pair's target (<= max_len): its
                                                      [:-1] is the decoder input, its [1:] the labels
    decoder input of an output: BOS + output[:-1]     (teacher forcing: position i predicts output[i])

The tokenizer only needs encode(text, side).
"""
from __future__ import annotations

from typing import Sequence

from explorer.text.special import BOS_ID, EOS_ID


def with_eos(ids: Sequence[int], max_len: int) -> list[int]:
    """ids cut so that ids + EOS fits in max_len, then EOS."""
    return [int(i) for i in ids][:max_len - 1] + [EOS_ID]


def source_ids(tokenizer, text: str, max_len: int) -> list[int]:
    """The encoder input of `text`: its source pieces + EOS, at most max_len ids."""
    return with_eos(tokenizer.encode(text, side="src"), max_len)


def output_ids(tokenizer, text: str, max_len: int) -> list[int]:
    """`text` as a decoder output (a reference to score or trace): target pieces + EOS, at most max_len."""
    return with_eos(tokenizer.encode(text, side="tgt"), max_len)


def target_ids(tokenizer, text: str, max_len: int) -> list[int]:
    """A training target: BOS + target pieces + EOS, at most max_len ids in all."""
    return [BOS_ID] + output_ids(tokenizer, text, max_len - 1)


def decoder_inputs(out_ids: Sequence[int]) -> list[int]:
    """What the decoder reads while it writes `out_ids` (teacher forcing): BOS + out_ids[:-1]."""
    return [BOS_ID] + [int(t) for t in out_ids][:-1]
