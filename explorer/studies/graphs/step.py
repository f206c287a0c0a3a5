"""The question a graph answers, from text: the source sentence, the decoder's prefix (a forced target's
pieces, or the model's own greedy output), the output position K and, for a contrast, a foil word.

Position K is 0-based, as in the graph's JSON: the decoder has read its start id and outputs 0..K-1 and
writes output K (K = the output's length asks for the EOS). A foil is one word; the contrast is with its
first target piece, the token that would start the word at this step (a word of several pieces says so
in the result). Everything is refused with a ValueError of one line: an empty source, a position past the
output, a foil that is blank, several words, longer than MAX_FOIL_CHARS, unknown to the vocabulary, a
special token or the explained token itself.
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.decoding.core import special_ids
from explorer.decoding.translate import forced_target, word_ids
from explorer.studies.common.sentences import greedy_ids
from explorer.studies.common.source_file import MAX_SENTENCE_CHARS
from explorer.studies.graphs.replacement import Step
from explorer.text.encoding import output_ids, source_ids

MAX_TEXT_CHARS = MAX_SENTENCE_CHARS   # a sentence; a pasted file is refused before it is tokenized
MAX_FOIL_CHARS = 60


@dataclass(frozen=True)
class Question:
    step: Step
    pieces: list[str]                # the source pieces, then the prefix pieces (circuit-tracer's prompt tokens)
    output: list[int]                # the whole output the prefix is cut from (EOS included)
    target_piece: str                # the piece of output K
    foil_note: str = ""              # what became of a foil word of several pieces


def question(model, tokenizer, text: str, position: int, target: str | None = None,
             foil: str | None = None) -> Question:
    if not text or not text.strip():
        raise ValueError("--text: give a source sentence")
    if len(text) > MAX_TEXT_CHARS or (target is not None and len(target) > MAX_TEXT_CHARS):
        raise ValueError(f"a sentence of at most {MAX_TEXT_CHARS:,} characters, please")
    special, max_len = special_ids(model), model.cfg.max_len
    src = source_ids(tokenizer, text, max_len, special)
    if len(src) < 2:                 # EOS alone: only characters the tokenizer drops (a zero-width space)
        raise ValueError("--text: the sentence produced no source pieces, only characters the tokenizer drops")
    if target is not None:
        out = output_ids(tokenizer, target, max_len, special)
    else:
        out = (greedy_ids(model, [src], given=forced_target(tokenizer))[0] + [special.eos])[:max_len]
    if not 0 <= position < len(out):
        raise ValueError(f"--position {position}: the output has positions 0..{len(out) - 1} "
                         f"({len(out) - 1} is its end of sentence)")
    prefix = [special.start] + out[:position]
    token = out[position]
    foil_id, note = (None, "") if foil is None else foil_token(model, tokenizer, foil, token)
    pieces = [tokenizer.id_to_piece(int(i), "src") for i in src] + \
        [tokenizer.id_to_piece(int(i), "tgt") for i in prefix]
    return Question(Step(tuple(src), tuple(prefix), int(token), foil_id), pieces, out,
                    tokenizer.id_to_piece(int(token), "tgt"), note)


def foil_token(model, tokenizer, word: str, token: int) -> tuple[int, str]:
    """(the foil's first target piece, a note when the word has several pieces)."""
    word = word.strip()
    if not word or len(word.split()) != 1 or len(word) > MAX_FOIL_CHARS:
        raise ValueError(f"the foil must be one word of at most {MAX_FOIL_CHARS} characters")
    special = special_ids(model)
    pieces = [p for p in word_ids(tokenizer, word) if tokenizer.id_to_piece(int(p), "tgt") != "\u2581"]
    if not pieces or pieces[0] == special.unk:
        raise ValueError(f"the foil {word!r}: the target vocabulary does not know it")
    first = int(pieces[0])
    if first in special.never_output or first == int(token):
        raise ValueError(f"the foil {word!r} starts with {tokenizer.id_to_piece(first, 'tgt')!r}, "
                         "the explained token itself or one the model never writes")
    note = "" if len(pieces) == 1 else (f"{word!r} has {len(pieces)} pieces; contrasted with its first, "
                                        f"{tokenizer.id_to_piece(first, 'tgt')!r}")
    return first, note
