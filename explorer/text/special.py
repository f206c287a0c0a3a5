"""The special token ids and pieces every tokenizer, model, trainer and decoder here agrees on.

PAD pads batches and is masked out of attention and the loss, UNK stands for an unknown piece,
BOS starts every decoder input, EOS ends every source and every finished output. The constants
are this project's own tokenizers' ids and the defaults of ModelConfig's pad_id, unk_id,
decoder_start_id and eos_id; a model with other ids (an imported Marian model: eos 0, unk 1, pad
the last id, the decoder starting with pad; M2M100 / NLLB: pad 1, eos 2, unk 3, the decoder starting
with eos) says so in its config, and the model, decoding and
text encoding read `SpecialIds` from there (`model.cfg.special`) rather than the constants.
"""
from __future__ import annotations

from dataclasses import dataclass

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")       # the pieces at ids 0..3, in that order


@dataclass(frozen=True)
class SpecialIds:
    """One model's special ids: `start` is the decoder's first input (BOS here, pad in Marian)."""

    pad: int = PAD_ID
    unk: int = UNK_ID
    start: int = BOS_ID
    eos: int = EOS_ID

    @property
    def never_output(self) -> tuple[int, ...]:
        """Ids no decoder ever writes: PAD and the start id (once, when they are the same id), unless
        the start id is EOS (M2M100 and NLLB start the decoder with </s>): EOS must stay writable."""
        return tuple(dict.fromkeys(i for i in (self.pad, self.start) if i != self.eos))

    @property
    def before_min_len(self) -> tuple[int, ...]:
        """... nor, before min_len output tokens, EOS."""
        return self.never_output + (self.eos,)


DEFAULT_IDS = SpecialIds()
