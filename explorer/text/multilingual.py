"""M2M100 and NLLB-200 tokenization: one sentencepiece model, fairseq's ids, a language tag per side.

Both models share one vocabulary for every language, numbered as fairseq numbers it: <s> 0, <pad> 1,
</s> 2, <unk> 3, then the pieces, then one token per language (M2M100 "__en__", NLLB "eng_Latn"),
then a few unused ids (M2M100's made-up words, NLLB's <mask>). What numbers the pieces differs:
  m2m100  vocab.json (piece -> id), as transformers.M2M100Tokenizer
  nllb    the sentencepiece id + 1 (fairseq's offset; the model's own <unk>, <s>, </s> map to 3, 0, 2),
          as transformers.NllbTokenizer
A sentence is written with its language's tag in front and </s> at the end (M2M100, and NLLB's
non-legacy layout): the source [src_lang] pieces </s>; the decoder starts with </s> and its first
output is the target tag, [tgt_lang] pieces </s>. So a tokenizer is bound to a language pair
(`with_languages`, or the pair an import was given): its encode() puts the tag in front (explorer.text.
encoding adds </s> as for every model), and `forced_target` is the tag every output starts with, which
decoding forces (decoding.core.with_given). An unbound one refuses to encode, naming some languages:
a multilingual model fed no language tag translates into whatever language it guesses.

Files: sentencepiece.bpe.model, languages.json (ours: the kind, the model's vocabulary size, each
language's id, the other added tokens, the default pair), and for M2M100 vocab.json. Untrusted input,
bounded in bytes and checked like Marian's (vocab_tokenizer.py); the tokenizer pickles as its bytes.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Iterable

from explorer.files import limits
from explorer.files.atomic import write_files
from explorer.files.names import MARIAN_VOCAB as VOCAB_FILE
from explorer.files.names import MULTILINGUAL_LANGUAGES as LANGUAGES_FILE, MULTILINGUAL_SPM as SPM_FILE
from explorer.files.user_files import json_of, read_user_file
from explorer.text.special import SpecialIds
from explorer.text.tokenizer import missing_files, sentencepiece_model

KINDS = ("m2m100", "nllb")
FAIRSEQ_SPECIAL = ("<s>", "<pad>", "</s>", "<unk>")          # ids 0..3 in both models
SPECIAL = SpecialIds(pad=1, unk=3, start=2, eos=2)           # the decoder starts with </s>
NLLB_OFFSET = 1                                               # fairseq id = sentencepiece id + 1
MAX_UNUSED = 64        # ids past the last piece or language the model may have (M2M100: 8 made-up words)
MAX_FILE_BYTES = limits.TOKENIZER_BYTES
WORD_MARK = "\u2581"


def language_token(kind: str, code: str) -> str:
    """The token a language is written as: M2M100 "__en__", NLLB the code itself ("eng_Latn")."""
    return f"__{code}__" if kind == "m2m100" else code


def _read_json(name: str, data: bytes):
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{name}: {len(data):,} bytes is more than the {MAX_FILE_BYTES:,} allowed")
    return json_of(data, name, limits.TOKENIZER_VALUES)     # a byte-order mark read as other JSON files are


def _ids(name: str, mapping, what: str) -> dict[str, int]:
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and type(v) is int for k, v in mapping.items()):
        raise ValueError(f"{name}: {what} must be an object of token -> integer id")
    return dict(mapping)


class MultilingualTokenizer:
    """M2M100's or NLLB's tokenizer, optionally bound to a language pair (module docstring)."""

    joint = True                               # one vocabulary and one sentencepiece model for both sides
    special = SPECIAL

    def __init__(self, files: dict[str, bytes], src_lang: str | None = None, tgt_lang: str | None = None):
        self._files = {n: bytes(b) for n, b in files.items()}
        if SPM_FILE not in files or LANGUAGES_FILE not in files:
            raise ValueError(f"expected {SPM_FILE} and {LANGUAGES_FILE}, got {sorted(files)}")
        info = _read_json(LANGUAGES_FILE, self._files[LANGUAGES_FILE])
        if not isinstance(info, dict) or info.get("kind") not in KINDS:
            raise ValueError(f"{LANGUAGES_FILE}: 'kind' must be one of {', '.join(KINDS)}")
        self.kind = info["kind"]
        if len(self._files[SPM_FILE]) > MAX_FILE_BYTES:
            raise ValueError(f"{SPM_FILE}: more than the {MAX_FILE_BYTES:,} bytes allowed")
        self._sp = sentencepiece_model(SPM_FILE, self._files[SPM_FILE])
        self._vocab = self._piece_ids()                                       # piece -> id
        self.languages = _ids(LANGUAGES_FILE, info.get("languages"), "'languages'")   # code -> id
        others = _ids(LANGUAGES_FILE, info.get("other_tokens", {}), "'other_tokens'")
        size = info.get("vocab_size")
        tokens = {**{language_token(self.kind, c): i for c, i in self.languages.items()}, **others}
        taken = set(self._vocab.values())
        clash = [t for t, i in tokens.items() if i in taken]
        if clash:
            raise ValueError(f"{LANGUAGES_FILE}: language or added token ids collide with the pieces' ({clash[:3]})")
        if len(set(tokens.values())) != len(tokens):
            shared = sorted(i for i in set(tokens.values()) if list(tokens.values()).count(i) > 1)
            raise ValueError(f"{LANGUAGES_FILE}: two language or added tokens share an id ({shared[:3]})")
        # The added tokens follow the pieces (a few unused ids may sit between): an id past that would size
        # the id -> piece table below by a number from the file alone.
        last = max(self._vocab.values()) + len(tokens) + MAX_UNUSED
        if not all(0 <= i <= last for i in tokens.values()):
            raise ValueError(f"{LANGUAGES_FILE}: language and added token ids must follow the pieces' "
                             f"(0..{last}); found {max(tokens.values()):,}")
        covered = max([*self._vocab.values(), *tokens.values()]) + 1
        if type(size) is not int or not covered <= size <= covered + MAX_UNUSED:
            raise ValueError(f"{LANGUAGES_FILE}: the model's vocabulary of {size} ids does not fit this tokenizer, "
                             f"which numbers {covered} (at most {MAX_UNUSED} unused ids may follow)")
        self.vocab_size = size
        self._piece = [f"<unused_{i}>" for i in range(size)]                  # id -> piece
        for piece, i in {**self._vocab, **tokens}.items():
            self._piece[i] = piece
        self._skip = {*range(len(FAIRSEQ_SPECIAL)), *tokens.values(), *range(covered, size)}
        self._id_of_language = {**self.languages, **{language_token(self.kind, c): i for c, i in self.languages.items()}}
        default = info.get("default") or [None, None]
        if not (isinstance(default, list) and len(default) == 2 and all(d is None or isinstance(d, str) for d in default)):
            raise ValueError(f"{LANGUAGES_FILE}: 'default' must be [source code or null, target code or null]")
        self.src_lang = self._check_language(src_lang or default[0]) if (src_lang or default[0]) else None
        self.tgt_lang = self._check_language(tgt_lang or default[1]) if (tgt_lang or default[1]) else None

    def _piece_ids(self) -> dict[str, int]:
        sp = self._sp
        if self.kind == "nllb":
            vocab = {p: i for i, p in enumerate(FAIRSEQ_SPECIAL)}
            for i in range(len(FAIRSEQ_SPECIAL) - 1, sp.get_piece_size()):      # sentencepiece's 0-2: unk, s, /s
                vocab.setdefault(sp.id_to_piece(i), i + NLLB_OFFSET)
            return vocab
        if VOCAB_FILE not in self._files:
            raise ValueError(f"an M2M100 tokenizer needs {VOCAB_FILE}")
        vocab = _ids(VOCAB_FILE, _read_json(VOCAB_FILE, self._files[VOCAB_FILE]), "the vocabulary")
        if sorted(vocab.values()) != list(range(len(vocab))):
            raise ValueError(f"{VOCAB_FILE}: ids must be exactly 0..{len(vocab) - 1}, each once")
        if [vocab.get(p) for p in FAIRSEQ_SPECIAL] != [0, 1, 2, 3]:
            raise ValueError(f"{VOCAB_FILE}: <s>, <pad>, </s>, <unk> must have ids 0, 1, 2, 3")
        return vocab

    # ---- languages ----
    def _check_language(self, code: str) -> str:
        if code in self._id_of_language:
            return code[2:-2] if self.kind == "m2m100" and code not in self.languages else code
        raise ValueError(f"unknown language {code!r} for this {self.kind} model; it has {len(self.languages)}, "
                         f"e.g. {self.some_languages()}")

    def some_languages(self, n: int = 8) -> str:
        codes = sorted(self.languages)
        common = [c for c in ("en", "eng_Latn", "fr", "fra_Latn", "de", "deu_Latn", "es", "spa_Latn") if c in codes]
        shown = list(dict.fromkeys(common + codes))[:n]
        return ", ".join(shown) + (", ..." if len(codes) > n else "")

    def with_languages(self, src_lang: str | None, tgt_lang: str | None) -> "MultilingualTokenizer":
        """A copy bound to (src_lang, tgt_lang) (None keeps this one's); refuses an unknown code in one line."""
        bound = copy.copy(self)
        bound.src_lang = self._check_language(src_lang) if src_lang else self.src_lang
        bound.tgt_lang = self._check_language(tgt_lang) if tgt_lang else self.tgt_lang
        return bound

    def language_id(self, code: str) -> int:
        return self.languages[self._check_language(code)]

    def _bound(self, side: str) -> str:
        lang = {"src": self.src_lang, "tgt": self.tgt_lang}[self._check_side(side)]
        if lang is None:
            flag = "--src-lang" if side == "src" else "--tgt-lang"
            raise ValueError(f"this {self.kind} model translates between {len(self.languages)} languages: choose the "
                             f"{'source' if side == 'src' else 'target'} language ({flag}), e.g. {self.some_languages()}")
        return lang

    def check_pair(self) -> None:
        """ValueError in one line, naming some languages, unless both languages are chosen (a command
        refuses an unbound model before it reads anything)."""
        self._bound("src")
        self._bound("tgt")

    @property
    def forced_target(self) -> list[int]:
        """The target-language tag every output starts with (none until a target language is chosen)."""
        return [self.languages[self.tgt_lang]] if self.tgt_lang else []

    # ---- pickling and files ----
    def __getstate__(self) -> dict:
        return {"files": self._files, "src_lang": self.src_lang, "tgt_lang": self.tgt_lang}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["files"], state["src_lang"], state["tgt_lang"])

    @classmethod
    def load(cls, directory: str | os.PathLike, *, confined: bool = True) -> "MultilingualTokenizer":
        names = [SPM_FILE, LANGUAGES_FILE] + ([] if missing_files(directory, [VOCAB_FILE]) else [VOCAB_FILE])
        for name in names:
            path = os.path.join(directory, name)
            if missing_files(directory, [name]):          # a folder or a link to /dev/zero: said as such
                raise FileNotFoundError(f"no M2M100/NLLB tokenizer in {directory}: missing {name}")
            if os.path.getsize(path) > MAX_FILE_BYTES:
                raise ValueError(f"{name}: more than the {MAX_FILE_BYTES:,} bytes allowed")
        inside = directory if confined else None
        return cls({n: read_user_file(os.path.join(directory, n), MAX_FILE_BYTES, inside=inside) for n in names})

    def save(self, directory: str | os.PathLike) -> list[str]:
        """Write the files, languages.json with this tokenizer's pair as the default."""
        info = _read_json(LANGUAGES_FILE, self._files[LANGUAGES_FILE])
        info["default"] = [self.src_lang, self.tgt_lang]
        files = {**self._files, LANGUAGES_FILE: json.dumps(info, ensure_ascii=False, indent=1).encode()}
        return write_files(directory, files)

    @property
    def files(self) -> list[str]:
        return sorted(self._files)

    def model_bytes(self) -> dict[str, bytes]:
        return dict(self._files)

    @property
    def src_vocab_size(self) -> int:
        return self.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        return self.vocab_size

    # ---- use ----
    @staticmethod
    def _check_side(side: str) -> str:
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', not {side!r}")
        return side

    def _segment(self, text: str) -> list[tuple[str, int]]:
        """(what the text said, id) per sentencepiece piece; a piece the vocabulary lacks is <unk>."""
        return [(p.surface.strip() or p.piece, self._vocab.get(p.piece, SPECIAL.unk))
                for p in self._sp.encode(text, return_type="proto").pieces]

    def encode(self, text: str, side: str = "src") -> list[int]:
        """The side's language tag, then the ids of `text`'s pieces (no </s>: explorer.text.encoding adds it)."""
        lang = self._bound(side)
        return [self.languages[lang]] + [i for _, i in self._segment(text)]

    def pieces(self, text: str, side: str = "src") -> list[str]:
        return [self._piece[i] for i in self.encode(text, side)]

    def unknown(self, text: str, side: str = "src") -> list[str]:
        """The parts of `text` read as <unk>, in order."""
        return [said for said, i in self._segment(text) if i == SPECIAL.unk]

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        self._check_side(side)
        if not 0 <= int(i) < len(self._piece):
            raise IndexError(f"id {int(i)} is outside the vocabulary (0 to {len(self._piece) - 1})")
        return self._piece[int(i)]

    def decode(self, ids: Iterable[int], side: str = "tgt") -> str:
        """Text of `ids` without the special ids, language tags and unused ids (skip_special_tokens=True)."""
        self._check_side(side)
        kept = [self.id_to_piece(i) for i in ids if int(i) not in self._skip]
        return self._sp.decode_pieces(kept).replace(WORD_MARK, " ").strip()

    def __repr__(self) -> str:
        pair = f", {self.src_lang}->{self.tgt_lang}" if self.src_lang or self.tgt_lang else ""
        return f"MultilingualTokenizer({self.kind}, vocab={self.vocab_size}, {len(self.languages)} languages{pair})"
