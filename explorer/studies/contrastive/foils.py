"""What a contrastive question contrasts: the chosen token at a step of decoding and a foil.

"Why *governor* and not *president*?" is asked at one step: given the source and the target prefix
written so far, the model put the chosen token above the foil. A foil is a token id (a pruned or kept
candidate of the beam tree, an alternative the BeamTrace recorded) or a word the user types.

A typed word. The model writes pieces, not words, and one step writes one piece, so the contrast at
this step is with the word's FIRST piece on the target side: the token that would start the word here.
(The alternative, the sum of all its pieces' log-probs teacher-forced after this step, asks a different
question, "why this continuation and not that whole word", and each extra piece conditions on the foil's
own earlier pieces, not on what the model wrote.) The result says how many pieces the word has and which
one is contrasted, so a word split into many pieces is never silently cut.

Refused with a ValueError that says why (the app shows the message): an empty or blank word, several
words, a word longer than MAX_FOIL_CHARS, a word whose first piece is the unknown token (characters the
vocabulary does not know: the contrast would be with <unk>, not with the word), a word with no piece but
the word boundary, an id outside the vocabulary or one the model never writes (PAD, the start id), and a
foil equal to the chosen token (nothing to contrast).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from explorer.decoding.beam_trace import BeamTrace
from explorer.decoding.core import special_ids
from explorer.decoding.translate import word_ids

MAX_FOIL_CHARS = 60                  # one word; a paste of a paragraph is refused before it is tokenized
BOUNDARY = "\u2581"                  # sentencepiece's word-boundary mark


@dataclass(frozen=True)
class Foil:
    """The token contrasted with the chosen one at a step, and where it came from."""

    token: int                       # the id whose log-prob is subtracted
    pieces: tuple[int, ...]          # a typed word's target pieces ((token,) for an id)
    word: str = ""                   # the typed word ("" for an id)
    note: str = ""                   # what was done with a word of several pieces ("" otherwise)


def _piece(tokenizer, token: int) -> str:
    return tokenizer.id_to_piece(int(token), "tgt") if tokenizer is not None else str(int(token))


def foil_from_id(model, token, chosen: int, tokenizer=None) -> Foil:
    """A foil given as a target id (a beam candidate or a recorded alternative)."""
    vocab, special = model.cfg.tgt_vocab_size, special_ids(model)
    if isinstance(token, bool) or not isinstance(token, int):
        raise ValueError(f"a foil id is a whole number in [0, {vocab - 1}], not {str(token)[:40]!r}")
    if not 0 <= token < vocab:
        raise ValueError(f"foil id {token} is outside the target vocabulary [0, {vocab - 1}]")
    if token in special.never_output:
        raise ValueError(f"foil id {token} is {_piece(tokenizer, token)!r}, a token the model never writes "
                         "(padding or the start id): choose a word")
    if token == int(chosen):
        raise ValueError(f"the foil {_piece(tokenizer, token)!r} is the chosen token itself: nothing to contrast")
    return Foil(token=token, pieces=(token,))


def foil_from_word(model, tokenizer, word: str, chosen: int) -> Foil:
    """A foil typed as a word: its first target piece (module docstring), or a ValueError saying why not."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError("type a word to contrast with (the foil is empty)")
    word = word.strip()
    if len(word) > MAX_FOIL_CHARS:
        raise ValueError(f"a foil is one word of at most {MAX_FOIL_CHARS} characters, not {len(word)}")
    if len(word.split()) > 1:
        raise ValueError(f"type one word, not {len(word.split())}: one step writes one token, and the contrast is "
                         "with the token that would start the word here")
    pieces = tuple(word_ids(tokenizer, word))       # without a multilingual target tag
    unk = special_ids(model).unk
    if not pieces:
        raise ValueError(f"{word!r} gives no target pieces")
    boundary = _piece(tokenizer, pieces[0]) == BOUNDARY and len(pieces) > 1
    first = pieces[1] if boundary else pieces[0]           # "▁" then the word's pieces: contrast with the word's own
    if first == unk or all(t == unk or _piece(tokenizer, t) == BOUNDARY for t in pieces):
        raise ValueError(f"{word!r} has characters the target vocabulary does not know (it starts with the unknown "
                         "piece), so the contrast would be with <unk>, not with the word")
    names = [_piece(tokenizer, t) for t in pieces]
    note = ""
    if len(pieces) > 1:
        note = (f"{word!r} is {len(pieces)} pieces ({' '.join(names)}); one step writes one piece, so the contrast "
                f"is with its first, {_piece(tokenizer, first)!r}")
        if unk in pieces:
            note += "; some of its characters are unknown to the vocabulary"
    if first == int(chosen):
        raise ValueError(f"{word!r} starts with the chosen token {_piece(tokenizer, first)!r} itself: at this step "
                         "the two are the same token, so there is nothing to contrast")
    foil = foil_from_id(model, first, chosen, tokenizer)
    return Foil(token=foil.token, pieces=pieces, word=word, note=note)


@dataclass(frozen=True)
class Step:
    """One step of decoding as a contrast needs it: the prefix written before it and the token chosen."""

    prefix: list[int]                # output ids before the step (no start id, no EOS)
    chosen: int
    alternatives: list[tuple[int, float]]   # (token, log-prob) its parent could have written, best first


def step_of(trace: BeamTrace, row: int) -> Step:
    """The step a BeamTrace row stands for: its hypothesis's earlier tokens, its own token, and the other
    tokens the same parent could have written (the foils the beam tree offers)."""
    if not 0 <= int(row) < len(trace.candidates):
        raise ValueError(f"row must be in [0, {len(trace.candidates) - 1}], not {row}")
    tokens = trace.tokens(int(row))
    chosen = tokens[-1]
    return Step(prefix=tokens[:-1], chosen=chosen,
                alternatives=[(t, lp) for t, lp in trace.alternatives_for(int(row)) if t != chosen])


def check_step(model, prefix: Sequence[int], chosen: int) -> list[int]:
    """The prefix as content ids and the chosen id in range (decoding.core's rules for a prefix)."""
    from explorer.decoding.core import check_prefix

    prefix = check_prefix(prefix, model)
    vocab = model.cfg.tgt_vocab_size
    if isinstance(chosen, bool) or not isinstance(chosen, int) or not 0 <= chosen < vocab:
        raise ValueError(f"the chosen token must be an id in [0, {vocab - 1}], not {str(chosen)[:40]!r}")
    return prefix
