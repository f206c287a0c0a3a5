"""An M2M100 or NLLB directory's tokenizer files -> explorer.text.multilingual's MultilingualTokenizer.

What the hub ships differs by model, so the language tokens' ids are found in the first place that
states them:
  NLLB    tokenizer.json's added_tokens (the fast tokenizer every NLLB repository ships), else
          tokenizer_config.json's added_tokens_decoder, else fairseq's layout: the codes after the
          sentencepiece pieces + 1, in language_codes.NLLB_CODES' order, <mask> after them
  M2M100  vocab.json's size + the code's place in tokenizer_config.json's language_codes set
          ("m2m100" by default, or "wmt21"), as M2M100Tokenizer numbers them; its made-up words after
Which kind a directory is: vocab.json beside sentencepiece.bpe.model is M2M100, the model alone NLLB.
NLLB's legacy layout (the source tag after </s>) is refused. transformers is not needed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from explorer.files import names
from explorer.files.limits import TOKENIZER_BYTES, whole_number
from explorer.files.user_files import UserFileError, read_user_file
from explorer.interop.config_fields import brief
from explorer.interop.hf_source import SourceError, parse_json, read_json, read_optional_json
from explorer.text.language_codes import M2M100_SETS, NLLB_CODES
from explorer.text.tokenizer import sentencepiece_model
from explorer.text.multilingual import (FAIRSEQ_SPECIAL, LANGUAGES_FILE, NLLB_OFFSET, SPM_FILE, VOCAB_FILE,
                                        MultilingualTokenizer)

NLLB_CODE = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")          # eng_Latn
MADE_UP = "madeupword{:04d}"                                  # M2M100Tokenizer's unused tokens


def tokenizer_from_hf(directory: Path, vocab_size: int) -> MultilingualTokenizer:
    """The tokenizer of an M2M100 / NLLB directory for a model of `vocab_size` ids (unbound: no language pair)."""
    spm_path = directory / names.MULTILINGUAL_SPM
    if not spm_path.is_file():
        raise SourceError(f"{directory}: no {names.MULTILINGUAL_SPM} (the sentencepiece model M2M100 and NLLB use)")
    config = read_optional_json(directory / names.HF_TOKENIZER_CONFIG)
    legacy = config.get("legacy_behaviour", False)
    if legacy is not None and not isinstance(legacy, bool):      # transformers takes any truthy value as true
        raise SourceError(f"{directory / names.HF_TOKENIZER_CONFIG}: legacy_behaviour must be true or false, "
                          f"not {legacy!r:.40}")
    if legacy is True:
        raise SourceError(f"{directory / names.HF_TOKENIZER_CONFIG}: legacy_behaviour (the source's language tag "
                          "after </s>) is not supported; set it to false, as transformers' default is")
    files = {SPM_FILE: _read_bytes(spm_path)}
    vocab_path = directory / VOCAB_FILE
    if vocab_path.is_file():
        files[VOCAB_FILE] = _read_bytes(vocab_path)
        languages, others = _m2m100_languages(files[VOCAB_FILE], vocab_path, config)
        kind = "m2m100"
    else:
        kind = "nllb"
        languages, others = _nllb_languages(directory, config, _piece_count(files[SPM_FILE], spm_path))
    info = {"kind": kind, "vocab_size": vocab_size, "languages": languages, "other_tokens": others,
            "default": [None, None]}
    files[LANGUAGES_FILE] = json.dumps(info, ensure_ascii=False, indent=1).encode()
    try:
        return MultilingualTokenizer(files)
    except ValueError as exc:
        raise SourceError(f"{directory}: tokenizer: {exc}") from None


def _read_bytes(path: Path) -> bytes:
    """A tokenizer file read as a user's file is (a link to /proc/self/pagemap said only "Invalid argument")."""
    try:
        return read_user_file(path, TOKENIZER_BYTES)
    except UserFileError as exc:
        raise SourceError(str(exc)) from None


def _piece_count(model: bytes, path: Path) -> int:
    try:
        return sentencepiece_model(str(path), model).get_piece_size()
    except ValueError as exc:
        raise SourceError(str(exc)) from None


def _m2m100_languages(vocab_bytes: bytes, vocab_path: Path, config: dict) -> tuple[dict[str, int], dict[str, int]]:
    vocab = parse_json(vocab_bytes, vocab_path)
    if not isinstance(vocab, dict):
        raise SourceError(f"{vocab_path}: expected a JSON object of piece -> id")
    size = len(vocab)
    which = config.get("language_codes", "m2m100")
    if not isinstance(which, str) or which not in M2M100_SETS:
        raise SourceError(f"{vocab_path.parent / names.HF_TOKENIZER_CONFIG}: language_codes {brief(which)} is not one "
                          f"of {', '.join(M2M100_SETS)}")
    codes = M2M100_SETS[which]
    languages = {code: size + i for i, code in enumerate(codes)}
    made_up = config.get("num_madeup_words", 8)
    made_up = made_up if type(made_up) is int and 0 <= made_up <= 64 else 8
    others = {MADE_UP.format(j): size + len(codes) + j for j in range(made_up)}
    return languages, others


def _nllb_languages(directory: Path, config: dict, n_pieces: int) -> tuple[dict[str, int], dict[str, int]]:
    added = _added_tokens(directory, config)
    if added:
        specials = set(FAIRSEQ_SPECIAL)
        languages = {t: i for t, i in added.items() if NLLB_CODE.match(t)}
        others = {t: i for t, i in added.items() if t not in languages and t not in specials}
        if languages:
            return languages, others
    first = n_pieces + NLLB_OFFSET
    languages = {code: first + i for i, code in enumerate(NLLB_CODES)}
    return languages, {"<mask>": first + len(NLLB_CODES)}


def _added_tokens(directory: Path, config: dict) -> dict[str, int]:
    """token -> id of the added tokens a tokenizer.json or tokenizer_config.json lists ({} if neither does)."""
    fast = directory / names.HF_TOKENIZER_JSON
    if fast.is_file():
        data = read_json(fast, limit=TOKENIZER_BYTES)
        listed = data.get("added_tokens") if isinstance(data, dict) else None
        if isinstance(listed, list):
            return {t["content"]: t["id"] for t in listed
                    if isinstance(t, dict) and isinstance(t.get("content"), str) and type(t.get("id")) is int}
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        return {v["content"]: whole_number(k, digits=9) for k, v in decoder.items()
                if isinstance(v, dict) and isinstance(v.get("content"), str) and whole_number(k, digits=9) is not None}
    return {}
