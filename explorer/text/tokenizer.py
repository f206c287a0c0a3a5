"""Subword tokenizer: a thin wrapper over sentencepiece with fixed special ids.

Every model trained here gets the ids of explorer.text.special (PAD=0, UNK=1, BOS=2, EOS=3), so the
model, the trainer and the decoder use those constants without asking the tokenizer. `encode`
returns pieces only: where BOS and EOS go is explorer.text.encoding's business, the one place that
decides it for the trainer, the decoder and the app.

A tokenizer is one joint model (`tokenizer.model`, used for both sides; needed when embeddings
are tied) or two (`src.model`, `tgt.model`). The serialized model bytes are the whole state, so a
Tokenizer pickles cheaply (Streamlit caches) and `save` just writes the bytes back out.
"""
from __future__ import annotations

import io
import os
import re
from typing import Iterable, Sequence

import sentencepiece as spm

from explorer.files import limits
from explorer.files.atomic import write_files
from explorer.files.user_files import absent_or_odd, read_user_file
from explorer.files.names import JOINT_TOKENIZER as JOINT_FILE, SRC_TOKENIZER as SRC_FILE, TGT_TOKENIZER as TGT_FILE
from explorer.text.special import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID

MODEL_TYPES = ("bpe", "unigram", "word")
OTHER_FIELDS = 64         # top-level fields besides the pieces a model file may hold (piece_count)


def piece_count(data: bytes, stop_after: int) -> int | None:
    """How many pieces the serialized sentencepiece model `data` holds (its ModelProto's repeated field 1),
    counted by walking the protobuf's top level without building anything; the count stops once it
    passes `stop_after`. None when the top level holds more than OTHER_FIELDS fields besides the pieces
    (a ModelProto has four others, each once): no sentencepiece model, and a walk bounded by the count.
    Other bytes that are no protobuf end the walk: sentencepiece refuses those itself."""
    count, others, at, end = 0, 0, 0, len(data)
    while at < end and count <= stop_after:
        if data[at] == 0x0A and at + 1 < end and data[at + 1] < 0x80:   # a piece of < 128 bytes: most of them
            at += 2 + data[at + 1]
            count += 1
            continue
        key, at = _varint(data, at)
        wire = key & 7
        if key >> 3 != 1 or wire != 2:
            others += 1
            if others > OTHER_FIELDS:
                return None
        if wire == 0:                                      # a varint
            _, at = _varint(data, at)
        elif wire == 2:                                    # bytes: a piece is a field-1 message
            length, at = _varint(data, at)
            at += length
            count += key >> 3 == 1
        elif wire in (1, 5):                               # 8 or 4 fixed bytes
            at += 8 if wire == 1 else 4
        else:
            break
    return count


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """(value, the offset after it) of the protobuf varint at `at` (at most 10 bytes)."""
    value = shift = 0
    for i in range(at, min(at + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value, i + 1
        shift += 7
    return value, len(data)


def sentencepiece_model(name: str, data: bytes) -> spm.SentencePieceProcessor:
    """The sentencepiece model serialized in `data`, the bytes of the file `name`; ValueError naming the
    file otherwise. sentencepiece's own refusal tells a user nothing ("INTERNAL: src/sentencepiece_
    processor.cc(109) [model_proto->ParseFromArray(...)]", "unk is not defined"), and its memory is not
    bounded by the file's: pieces past any vocabulary's bound are refused before it reads them."""
    not_a_model = f"{name}: not a sentencepiece model (damaged or of another kind)"
    pieces = piece_count(data, limits.TOKENIZER_PIECES)
    if pieces is None:
        raise ValueError(not_a_model)
    if pieces > limits.TOKENIZER_PIECES:
        raise ValueError(f"{name}: holds more than {limits.TOKENIZER_PIECES:,} pieces, more than any model's "
                         "vocabulary may have (TOKENIZER_PIECES in explorer/files/limits.py)")
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(data)
    except Exception:                    # sentencepiece raises RuntimeError or its own errors
        raise ValueError(not_a_model) from None
    return sp


def missing_files(directory: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """The names that are not in `directory` at all; ValueError for one that is there but is no regular file
    (a folder, a FIFO, a link to /dev/zero or to nothing), said as such (absent_or_odd): a loader that
    asked isfile() called it missing, or took the other kind of tokenizer in its place."""
    missing = []
    for name in names:
        path = os.path.join(directory, name)
        problem = absent_or_odd(path)
        if problem == "file missing":
            missing.append(name)
        elif problem:
            raise ValueError(f"{path}: {problem}")
    return missing


def _train_model(lines: Sequence[str], vocab_size: int, model_type: str, seed: int | None) -> bytes:
    """Train one sentencepiece model in memory and return its serialized bytes."""
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise ValueError("cannot train a tokenizer on no text")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, not {model_type!r}")
    buf = io.BytesIO()
    kwargs = dict(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size,
        model_type=model_type, character_coverage=1.0, num_threads=2,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        pad_piece=SPECIAL_PIECES[PAD_ID], unk_piece=SPECIAL_PIECES[UNK_ID], bos_piece=SPECIAL_PIECES[BOS_ID],
        eos_piece=SPECIAL_PIECES[EOS_ID],
        # Small corpora (the numbers task has ~60 distinct words) cannot fill a large vocabulary:
        # let sentencepiece stop where the data runs out instead of failing.
        hard_vocab_limit=False, minloglevel=2, input_sentence_size=2_000_000,
        shuffle_input_sentence=True, train_extremely_large_corpus=False,
    )
    if model_type == "word":
        kwargs["split_by_whitespace"] = True
    if seed is not None:
        spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(**kwargs)
    except RuntimeError as err:          # sentencepiece's C++ check, with its source line: said in our words
        raise ValueError(_training_refusal(str(err), vocab_size, model_type)) from None
    return buf.getvalue()


def _training_refusal(text: str, vocab_size: int, model_type: str) -> str:
    """sentencepiece's refusal as one line a user can act on (the vocabulary too small for the text's
    characters is the one a --vocab-size can cause; any other is passed on without its C++ location)."""
    needed = re.search(r"required_chars\. \d+ vs (\d+)", text)
    if needed:
        return (f"a vocabulary of {vocab_size} pieces is smaller than the {needed[1]} this text needs (each of its "
                f"characters and the special pieces): use a vocabulary size of at least {needed[1]}")
    return f"sentencepiece cannot train a {model_type} tokenizer of {vocab_size} pieces: {text.split('] ', 1)[-1]}"


class Tokenizer:
    """sentencepiece model(s) for the source and target sides; see the module docstring."""

    PAD, UNK, BOS, EOS = PAD_ID, UNK_ID, BOS_ID, EOS_ID      # what this tokenizer's models are trained with

    def __init__(self, models: dict[str, bytes]):
        """`models` maps file name -> serialized bytes: {JOINT_FILE} or {SRC_FILE, TGT_FILE}."""
        if set(models) == {JOINT_FILE}:
            self.joint = True
        elif set(models) == {SRC_FILE, TGT_FILE}:
            self.joint = False
        else:
            raise ValueError(f"expected {JOINT_FILE} or {SRC_FILE}+{TGT_FILE}, got {sorted(models)}")
        self._models = dict(models)
        self._build()

    def _build(self) -> None:
        if self.joint:
            sp = sentencepiece_model(JOINT_FILE, self._models[JOINT_FILE])
            self._sp = {"src": sp, "tgt": sp}
        else:
            self._sp = {side: sentencepiece_model(name, self._models[name])
                        for side, name in (("src", SRC_FILE), ("tgt", TGT_FILE))}
        for side, sp in self._sp.items():
            got = tuple(sp.id_to_piece(i) for i in range(len(SPECIAL_PIECES)))
            if got != SPECIAL_PIECES or sp.pad_id() != PAD_ID:
                raise ValueError(f"{side} model has special pieces {got}, expected {SPECIAL_PIECES}")

    # ---- pickling: keep only the bytes, rebuild processors on load ----
    def __getstate__(self) -> dict:
        return {"models": self._models}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["models"])

    # ---- construction ----
    @classmethod
    def train(cls, src_lines: Iterable[str], tgt_lines: Iterable[str], out_dir: str | None = None,
              vocab_size: int = 8000, model_type: str = "bpe", joint: bool = True,
              seed: int | None = 0) -> "Tokenizer":
        """Train on the given lines and (if out_dir) save the model file(s) there."""
        src_lines, tgt_lines = list(src_lines), list(tgt_lines)
        if joint:
            models = {JOINT_FILE: _train_model(src_lines + tgt_lines, vocab_size, model_type, seed)}
        else:
            models = {SRC_FILE: _train_model(src_lines, vocab_size, model_type, seed),
                      TGT_FILE: _train_model(tgt_lines, vocab_size, model_type, seed)}
        tok = cls(models)
        if out_dir is not None:
            tok.save(out_dir)
        return tok

    @classmethod
    def load(cls, directory: str) -> "Tokenizer":
        """Load tokenizer.model, or src.model + tgt.model, from a directory."""
        if not missing_files(directory, [JOINT_FILE]):          # there, or said as what it is
            names = [JOINT_FILE]
        else:
            names = [SRC_FILE, TGT_FILE]
            missing = missing_files(directory, names)
            if missing:
                raise FileNotFoundError(
                    f"no tokenizer in {directory}: missing {JOINT_FILE} "
                    f"(joint) or {' and '.join(missing)} (separate)")
        # through the bounded reader: a 10 GiB sparse file or a symlink out of the folder is refused unread
        models = {n: read_user_file(os.path.join(directory, n), limits.TOKENIZER_BYTES, inside=directory)
                  for n in names}
        return cls(models)

    def save(self, directory: str) -> list[str]:
        """Write the model file(s) into `directory`; returns their names."""
        return write_files(directory, self._models)

    # ---- properties ----
    @property
    def files(self) -> list[str]:
        return sorted(self._models)

    @property
    def src_vocab_size(self) -> int:
        return self._sp["src"].get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._sp["tgt"].get_piece_size()

    def model_bytes(self) -> dict[str, bytes]:
        return dict(self._models)

    # ---- use ----
    def _side(self, side: str) -> spm.SentencePieceProcessor:
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', not {side!r}")
        return self._sp[side]

    def encode(self, text: str, side: str = "src") -> list[int]:
        """Piece ids of `text`, with no BOS/EOS."""
        return self._side(side).encode(text, out_type=int)

    def pieces(self, text: str, side: str = "src") -> list[str]:
        return self._side(side).encode(text, out_type=str)

    def unknown(self, text: str, side: str = "src") -> list[str]:
        """The parts of `text` the vocabulary cannot represent (each read as one <unk> piece), in order.

        From sentencepiece's own record of which input each piece covers, so an emoji, a Chinese
        word or an out-of-vocabulary word of a word-level model is named as the user typed it.
        """
        proc = self._side(side)
        covered = proc.encode(text, return_type="proto").pieces
        return [p.surface.strip() or p.surface for p in covered if p.id == proc.unk_id()]

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        return self._side(side).id_to_piece(int(i))

    def decode(self, ids: Iterable[int], side: str = "tgt") -> str:
        """Text of `ids`, ignoring PAD/BOS/EOS (and UNK renders as sentencepiece's ' ⁇ ')."""
        keep = [int(i) for i in ids if int(i) not in (PAD_ID, BOS_ID, EOS_ID)]
        return self._side(side).decode(keep)

    def __repr__(self) -> str:
        kind = "joint" if self.joint else "separate"
        return f"Tokenizer({kind}, src_vocab={self.src_vocab_size}, tgt_vocab={self.tgt_vocab_size})"
