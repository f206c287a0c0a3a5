"""A word's nearest training contexts: the training pieces whose states lie nearest the word's own, in
the encoder's view for a word of the sentence, in the decoder's for a word of the translation (the
state it was written from), each with the training pair and the word found at that piece.

Plain data for the app's "Where did it learn this?" and for the benchmark that times it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from explorer.data.types import Pair
from explorer.studies.grounding import states
from explorer.studies.grounding.influence import word_positions
from explorer.studies.common.words import span_word

SHOWN = 20                 # contexts a lookup returns


@dataclass(frozen=True)
class Context:
    pair: int                  # the training pair's place in the training split
    position: int              # its piece's position in the pair's source (or output) pieces
    cosine: float              # nearness in the map's space
    word: str                  # the word (as words()) that piece belongs to


def nearest_contexts(model, tokenizer, smap: states.StateMap, pairs: Sequence[Pair], source: str, word: str,
                     out_ids: Sequence[int] | None = None, k: int = SHOWN) -> list[Context]:
    """The k training contexts nearest `word`'s first piece: of `source` with a source map, of the output
    `out_ids` (the translation's piece ids) with an output map. [] when the word has no piece there."""
    side = "src" if smap.side == "source" else "tgt"
    if smap.side == "source":
        ids = tokenizer.encode(source, side="src")
    elif out_ids is None:
        raise ValueError("an output map's contexts need the translation's piece ids")
    else:
        ids = [int(i) for i in out_ids]
    positions = word_positions([tokenizer.id_to_piece(i, side) for i in ids], word)
    if not positions:
        return []
    if smap.side == "source":
        state = states.source_states(model, tokenizer, [source])[0][positions[0]]                  # [d]
    else:
        state = states.output_states(model, tokenizer, [source], [ids])[0][positions[0]]          # [d]
    found = []
    for pair, position, cosine in states.nearest(smap, state, k=k):
        text = pairs[pair].src if side == "src" else pairs[pair].tgt
        theirs = [tokenizer.id_to_piece(i, side) for i in tokenizer.encode(text, side=side)]
        found.append(Context(pair, position, cosine, span_word(theirs, position) if position < len(theirs) else ""))
    return found
