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

import re
from typing import Sequence

from explorer.text.special import DEFAULT_IDS, SpecialIds

# Characters read per kept piece before a long text is cut for encoding: far above any vocabulary's
# longest piece (sentencepiece's default max_sentencepiece_length is 16), so a cut text still yields
# every piece that is kept.
_CHARS_PER_PIECE = 32
_SPACE = re.compile(r"\s")


def leading_pieces(tokenizer, text: str, side: str, count: int) -> list[int]:
    """tokenizer.encode(text, side), of which only the first `count` ids are used: read from a prefix of
    a long text, so a test line of a million words costs what its first pieces cost, not a gigabyte.

    The prefix ends at a whitespace, where sentencepiece (which splits by whitespace) starts a new word,
    so its pieces are the whole text's first pieces; it grows until it yields more than `count` ids.
    Only inside a single word longer than the prefix (thousands of characters) is the text cut mid-word.
    """
    span = max(1, count) * _CHARS_PER_PIECE
    while len(text) > span:
        space = _SPACE.search(text, span)
        end = space.start() if space else span          # no whitespace after it: one endless word, cut
        ids = tokenizer.encode(text[:end], side=side)
        if len(ids) > count or not space:
            return ids
        span *= 4
    return tokenizer.encode(text, side=side)


def with_eos(ids: Sequence[int], max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """ids cut so that ids + EOS fits in max_len, then EOS."""
    return [int(i) for i in ids][:max_len - 1] + [special.eos]


def source_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """The encoder input of `text`: its source pieces + EOS, at most max_len ids."""
    return with_eos(leading_pieces(tokenizer, text, "src", max_len), max_len, special)


def output_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """`text` as a decoder output (a reference to score or trace): target pieces + EOS, at most max_len."""
    return with_eos(leading_pieces(tokenizer, text, "tgt", max_len), max_len, special)


def target_ids(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """A training target: BOS + target pieces + EOS, at most max_len ids in all."""
    return [special.start] + output_ids(tokenizer, text, max_len - 1, special)


def decoder_inputs(out_ids: Sequence[int], special: SpecialIds = DEFAULT_IDS) -> list[int]:
    """What the decoder reads while it writes `out_ids` (teacher forcing): BOS + out_ids[:-1]."""
    return [special.start] + [int(t) for t in out_ids][:-1]
