"""Marian (OPUS-MT) tokenization: sentencepiece cuts the text, vocab.json numbers the pieces.

An OPUS-MT checkpoint ships `source.spm` and `target.spm`, used only to segment text into pieces,
and `vocab.json` (piece -> id), one id space for both sides; the sentencepiece models' own ids are
never used. A piece the vocabulary lacks reads as <unk>, like a character sentencepiece cannot
segment. `target_vocab.json`, when present, numbers the target side on its own (Hugging Face's
separate_vocabs). The special ids are vocab.json's, looked up by piece: "</s>" (eos, 0 in OPUS-MT),
"<unk>" (1) and "<pad>" (the last id), with which the decoder also starts. A language code such as
">>fra<<" at the very start of the text is one piece, looked up as it is. This is what
transformers.MarianTokenizer does, tested against it; like it with sacremoses absent (this project
does not install it), no Moses punctuation normalisation is applied.

VocabTokenizer has Tokenizer's interface (encode gives pieces without EOS; explorer.text.encoding
adds it), so the decoder, the app and checkpoints use either kind unchanged; `special` gives the
ids an importer puts into ModelConfig. The files are untrusted input: sizes are capped before
anything is read and vocab.json is checked (an object of piece -> id, ids exactly 0..n-1, the three
special pieces present), each problem a ValueError saying what is wrong.
"""
from __future__ import annotations

import os
from typing import Iterable

import sentencepiece as spm

from explorer.files import limits
from explorer.files.atomic import write_files
from explorer.files.user_files import json_of, read_user_file
from explorer.files.names import MARIAN_SRC_SPM as SRC_SPM, MARIAN_TGT_SPM as TGT_SPM
from explorer.files.names import MARIAN_TGT_VOCAB as TGT_VOCAB_FILE, MARIAN_VOCAB as VOCAB_FILE
from explorer.text.special import SpecialIds
from explorer.text.tokenizer import missing_files, sentencepiece_model

REQUIRED, OPTIONAL = (SRC_SPM, TGT_SPM, VOCAB_FILE), (TGT_VOCAB_FILE,)
MAX_FILE_BYTES = limits.TOKENIZER_BYTES      # per file
EOS_PIECE, UNK_PIECE, PAD_PIECE = "</s>", "<unk>", "<pad>"
WORD_MARK = "▁"


def _check_size(name: str, size: int) -> None:
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{name}: {size:,} bytes is more than the {MAX_FILE_BYTES:,} allowed")


def parse_vocab(data: bytes, name: str = VOCAB_FILE) -> dict[str, int]:
    """A vocab.json's bytes -> {piece: id}, refusing anything but a dense, complete Marian vocabulary."""
    _check_size(name, len(data))
    vocab = json_of(data, name, limits.TOKENIZER_VALUES)      # a byte-order mark read as other JSON files are
    if not isinstance(vocab, dict):
        raise ValueError(f"{name}: expected a JSON object of piece -> id, got a {type(vocab).__name__}")
    bad = [(p, i) for p, i in vocab.items() if isinstance(i, bool) or not isinstance(i, int)]
    if bad:
        raise ValueError(f"{name}: ids must be integers; {bad[0][0]!r} has {bad[0][1]!r}")
    owner: dict[int, str] = {}
    for piece, i in vocab.items():
        if i in owner:
            raise ValueError(f"{name}: id {i} is used twice ({owner[i]!r} and {piece!r})")
        owner[i] = piece
    outside = sorted(i for i in owner if not 0 <= i < len(vocab))
    if outside:
        missing = min(set(range(len(vocab))) - set(owner))
        raise ValueError(f"{name}: ids must be exactly 0..{len(vocab) - 1} with no gaps; id {missing} is "
                         f"missing and {outside[0]} is out of range")
    absent = [p for p in (EOS_PIECE, UNK_PIECE, PAD_PIECE) if p not in vocab]
    if absent:
        raise ValueError(f"{name}: special piece(s) {', '.join(absent)} missing")
    return vocab


def _processor(name: str, data: bytes) -> spm.SentencePieceProcessor:
    _check_size(name, len(data))
    return sentencepiece_model(name, data)


def split_language_code(text: str) -> tuple[str, str]:
    """(">>xx<<", rest) when the text starts with a language code, else ("", text)."""
    end = text.find("<<") if text.startswith(">>") else -1
    return (text[:end + 2], text[end + 2:]) if end >= 0 else ("", text)


class VocabTokenizer:
    """Marian's tokenizer: two segmenting sentencepiece models and a piece -> id vocabulary."""

    joint = False                       # two sentencepiece files, whatever the vocabularies

    def __init__(self, files: dict[str, bytes]):
        """`files` maps file name -> bytes: source.spm, target.spm, vocab.json [, target_vocab.json]."""
        names = set(files)
        if not set(REQUIRED) <= names or names - set(REQUIRED + OPTIONAL):
            raise ValueError(f"expected {', '.join(REQUIRED)} (and optionally {TGT_VOCAB_FILE}), "
                             f"got {sorted(names)}")
        self._files = {n: bytes(files[n]) for n in sorted(names)}
        self._sp = {"src": _processor(SRC_SPM, self._files[SRC_SPM]),
                    "tgt": _processor(TGT_SPM, self._files[TGT_SPM])}
        src = parse_vocab(self._files[VOCAB_FILE], VOCAB_FILE)
        tgt = parse_vocab(self._files[TGT_VOCAB_FILE], TGT_VOCAB_FILE) if TGT_VOCAB_FILE in names else src
        # The special ids are vocab.json's for both sides, as in MarianTokenizer (the target vocabulary's
        # own <pad> goes unused); </s> and <unk> must then mean the same in both.
        ends = [(v[EOS_PIECE], v[UNK_PIECE]) for v in (src, tgt)]
        if ends[0] != ends[1]:
            raise ValueError(f"{TGT_VOCAB_FILE}: </s> and <unk> have ids {ends[1]}, but {ends[0]} in "
                             f"{VOCAB_FILE} (a model has one set of special ids)")
        pad = src[PAD_PIECE]
        self.special = SpecialIds(pad=pad, unk=src[UNK_PIECE], start=pad, eos=src[EOS_PIECE])
        self._vocab = {"src": src, "tgt": tgt}
        self._piece = {side: [""] * len(v) for side, v in self._vocab.items()}   # id -> piece
        for side, v in self._vocab.items():
            for piece, i in v.items():
                self._piece[side][i] = piece

    # ---- pickling: keep only the bytes (Streamlit caches pickle results) ----
    def __getstate__(self) -> dict:
        return {"files": self._files}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["files"])

    # ---- files ----
    @classmethod
    def load(cls, directory: str | os.PathLike, *, confined: bool = True) -> "VocabTokenizer":
        """Read the Marian files from a directory, refusing oversize files before reading them. `confined`:
        no file may be a symlink leading out of the directory (a checkpoint's own files); False for a
        folder a user names, whose files may link elsewhere (a Hugging Face cache snapshot links into
        its blobs/)."""
        missing = missing_files(directory, REQUIRED)       # a folder or a link to /dev/zero: said as such
        if missing:
            raise FileNotFoundError(f"no Marian tokenizer in {directory}: missing {', '.join(missing)}")
        absent = missing_files(directory, OPTIONAL)        # a target_vocab.json that is a folder is not absent
        paths = {n: os.path.join(directory, n) for n in REQUIRED + OPTIONAL if n not in absent}
        for name, path in paths.items():                   # every size before any file is read
            _check_size(name, os.path.getsize(path))
        inside = directory if confined else None
        files = {name: read_user_file(path, MAX_FILE_BYTES, inside=inside) for name, path in paths.items()}
        return cls(files)

    def save(self, directory: str | os.PathLike) -> list[str]:
        """Write the files into `directory` (each via a temporary file and a rename); returns their names."""
        return write_files(directory, self._files)

    @property
    def files(self) -> list[str]:
        return sorted(self._files)

    def model_bytes(self) -> dict[str, bytes]:
        return dict(self._files)

    @property
    def src_vocab_size(self) -> int:
        return len(self._vocab["src"])

    @property
    def tgt_vocab_size(self) -> int:
        return len(self._vocab["tgt"])

    # ---- use ----
    def _check_side(self, side: str) -> str:
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', not {side!r}")
        return side

    def _segment(self, text: str, side: str) -> list[tuple[str, int]]:
        """(what the text said, vocabulary id) per piece: the language code, then sentencepiece's pieces."""
        vocab, sp = self._vocab[self._check_side(side)], self._sp[side]
        code, rest = split_language_code(text)
        out = [(code, vocab.get(code, self.special.unk))] if code else []
        for p in sp.encode(rest, return_type="proto").pieces:   # a character sentencepiece lacks is a
            out.append((p.surface.strip() or p.piece, vocab.get(p.piece, self.special.unk)))   # piece of itself
        return out

    def encode(self, text: str, side: str = "src") -> list[int]:
        """Vocabulary ids of `text`'s pieces, with no EOS."""
        return [i for _, i in self._segment(text, side)]

    def pieces(self, text: str, side: str = "src") -> list[str]:
        """The pieces the ids of `text` stand for (a piece the vocabulary lacks shows as <unk>)."""
        return [self._piece[side][i] for i in self.encode(text, side)]

    def unknown(self, text: str, side: str = "src") -> list[str]:
        """The parts of `text` read as <unk>, in order: the pieces (or the language code) vocab.json lacks.

        These include what sentencepiece cannot segment (an emoji, a Chinese word): such a span is a
        piece of its own text, looked up like any other, so it is <unk> unless vocab.json has it.
        """
        return [said for said, i in self._segment(text, side) if i == self.special.unk]

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        pieces = self._piece[self._check_side(side)]
        if not 0 <= int(i) < len(pieces):
            raise IndexError(f"id {int(i)} is outside the {side} vocabulary (0 to {len(pieces) - 1})")
        return pieces[int(i)]

    def decode(self, ids: Iterable[int], side: str = "tgt") -> str:
        """Text of `ids`, leaving out pad (the decoder start), eos and unk, as MarianTokenizer.decode
        with skip_special_tokens=True: the side's sentencepiece model joins the pieces."""
        s, side = self.special, self._check_side(side)
        kept = [self.id_to_piece(i, side) for i in ids if int(i) not in (s.pad, s.start, s.eos, s.unk)]
        return self._sp[side].decode_pieces(kept).replace(WORD_MARK, " ").strip()

    def __repr__(self) -> str:
        kind = "separate" if TGT_VOCAB_FILE in self._files else "shared"
        return f"VocabTokenizer({kind} vocab, src_vocab={self.src_vocab_size}, tgt_vocab={self.tgt_vocab_size})"
