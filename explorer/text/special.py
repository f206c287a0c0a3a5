"""The special token ids and pieces every tokenizer, model, trainer and decoder here agrees on.

One place, so that a tokenizer with other ids (an imported model's) means changing what this
module hands out, not hunting for literals: PAD pads batches and is masked out of attention and
the loss, UNK stands for an unknown piece, BOS starts every decoder input, EOS ends every source
and every finished output.
"""
from __future__ import annotations

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")       # the pieces at ids 0..3, in that order
