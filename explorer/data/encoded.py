"""Sentence pairs as a model reads them: ids with EOS (source) and BOS + ids + EOS (target), with the
model's special ids, and the text kept beside. The trainer batches them; evaluation and comparison
score them."""
from __future__ import annotations

from dataclasses import dataclass

from explorer.text.encoding import source_ids, target_ids
from explorer.text.special import DEFAULT_IDS, PAD_ID, SpecialIds
from explorer.text.tokenizer import Tokenizer


@dataclass
class EncodedSplit:
    src: list[list[int]]      # sentencepiece ids + EOS
    tgt: list[list[int]]      # BOS + ids + EOS
    src_text: list[str]
    tgt_text: list[str]
    pad_id: int = PAD_ID      # what batches of it are padded with (the model's pad id)

    def __len__(self) -> int:
        return len(self.src)

    def lengths(self) -> list[tuple[int, int]]:
        return [(len(s), len(t) - 1) for s, t in zip(self.src, self.tgt)]

    def n_tokens(self) -> int:
        return sum(len(s) + len(t) - 1 for s, t in zip(self.src, self.tgt))


def encode_pairs(tokenizer: Tokenizer, pairs, max_len: int, special: SpecialIds = DEFAULT_IDS) -> EncodedSplit:
    """Sentence pairs as the model reads them (explorer.text.encoding, with the model's special
    ids: `model.cfg.special`), with their text kept."""
    src_text = [p.src for p in pairs]
    tgt_text = [p.tgt for p in pairs]
    return EncodedSplit([source_ids(tokenizer, s, max_len, special) for s in src_text],
                        [target_ids(tokenizer, t, max_len, special) for t in tgt_text], src_text, tgt_text,
                        special.pad)
