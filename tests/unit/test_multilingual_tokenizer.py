"""The M2M100 / NLLB tokenizer (explorer/text/multilingual.py) on its own: a bound copy leaves the original
unbound, it pickles and saves as its bytes with its pair, pieces the vocabulary lacks read as <unk>, the
decoded text leaves out the tags, and a damaged languages.json is refused with its reason."""
from __future__ import annotations

import json
import pickle

import pytest

from explorer.text import load_tokenizer
from explorer.text.multilingual import LANGUAGES_FILE, MultilingualTokenizer
from support.m2m100_helpers import write_tokenizer

pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def tokenizer(request, tmp_path_factory):
    from explorer.interop.m2m100_tokenizer import tokenizer_from_hf

    directory = tmp_path_factory.mktemp(request.param)
    size = write_tokenizer(directory, request.param)
    return tokenizer_from_hf(directory, size)


def codes(tok):
    return ("es", "en") if tok.kind == "m2m100" else ("spa_Latn", "eng_Latn")


def test_binding_makes_a_copy_and_the_tags_frame_the_text(tokenizer):
    src, tgt = codes(tokenizer)
    bound = tokenizer.with_languages(src, tgt)
    assert tokenizer.src_lang is None and tokenizer.forced_target == []
    ids = bound.encode("la casa es grande", "src")
    assert ids[0] == bound.language_id(src) and bound.forced_target == [bound.language_id(tgt)]
    assert bound.decode(bound.encode("la casa es grande", "tgt") + [2]) == "la casa es grande"
    assert bound.pieces("la casa", "src")[0] == (f"__{src}__" if tokenizer.kind == "m2m100" else src)


def test_a_piece_the_vocabulary_lacks_is_unk(tokenizer):
    bound = tokenizer.with_languages(*codes(tokenizer))
    assert "".join(bound.unknown("la casa 漢字", "src")) == "漢字"
    assert 3 in bound.encode("la casa 漢字", "src")


def test_it_pickles_and_saves_with_its_pair(tokenizer, tmp_path):
    bound = tokenizer.with_languages(*codes(tokenizer))
    again = pickle.loads(pickle.dumps(bound))
    assert (again.src_lang, again.tgt_lang) == (bound.src_lang, bound.tgt_lang)
    assert again.encode("la casa", "src") == bound.encode("la casa", "src")
    bound.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, MultilingualTokenizer) and loaded.forced_target == bound.forced_target
    assert loaded.src_vocab_size == bound.src_vocab_size


@pytest.mark.parametrize("edit, message", [
    ({"kind": "marian"}, "'kind' must be one of m2m100, nllb"),
    ({"vocab_size": 10}, "does not fit this tokenizer"),
    ({"languages": {"en": "x"}}, "'languages' must be an object of token -> integer id"),
    ({"languages": {"en": 4}}, "collide with the pieces"),
    ({"languages": {"en": -1}}, "must follow the pieces'"),
    # an id far past the pieces sized the id -> piece table (50,000,000 ids: killed at 2 GB listing models)
    ({"languages": {"en": 1_999_999}, "vocab_size": 2_000_000}, r"must follow the pieces' \(0\.\.\d+\); found 1,999,999"),
    ({"languages": {"en": 200, "fr": 200}}, r"two language or added tokens share an id \(\[200\]\)"),
    ({"default": "en"}, "'default' must be"),
])
def test_a_damaged_languages_file_is_refused_with_its_reason(tokenizer, edit, message):
    files = tokenizer.model_bytes()
    info = {**json.loads(files[LANGUAGES_FILE]), **edit}
    with pytest.raises(ValueError, match=message):
        MultilingualTokenizer({**files, LANGUAGES_FILE: json.dumps(info).encode()})


def test_a_vocabulary_file_of_too_many_values_is_refused_before_it_is_parsed(tokenizer):
    """63 MB of `[{},{},...]` (within the byte bound) took 4.4 GB to parse before "must be an object"."""
    files = tokenizer.model_bytes()
    name = "vocab.json" if tokenizer.kind == "m2m100" else LANGUAGES_FILE
    with pytest.raises(ValueError, match=rf"{name}: 4,000,00\d JSON values or more, where at most 2,000,000"):
        MultilingualTokenizer({**files, name: b"[" + b"{}," * 2_000_000 + b"{}]"})


def test_a_word_s_pieces_leave_out_the_sentence_s_language_tag(tokenizer):
    from explorer.text.word_pieces import word_pieces

    bound = tokenizer.with_languages(*codes(tokenizer))
    words = word_pieces(bound, "la casa")
    assert [w.ids for w in words] == [bound.encode(w, "src")[1:] for w in ("la", "casa")]
