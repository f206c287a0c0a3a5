"""Marian tokenization (explorer.text.vocab_tokenizer) against transformers.MarianTokenizer on files
made here: two small sentencepiece models and a vocab.json in OPUS-MT's layout (</s> 0, <unk> 1, a
language code, pieces, <pad> last), with some pieces left out of the vocabulary on purpose. Also
the checks of untrusted files, save/load/pickle, checkpoints that hold these files, and the
Attention page's end-of-sentence key for a model whose eos id is not this project's."""
from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import pytest
import torch

from explorer.config import ModelConfig
from explorer.decoding.translate import attention_trace
from explorer.model import Transformer
from explorer.store.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from explorer.text import encoding, load_tokenizer
from explorer.text.special import SpecialIds
from explorer.text.tokenizer import Tokenizer
from explorer.text.vocab_tokenizer import MAX_FILE_BYTES, VocabTokenizer
from support.marian_helpers import pieces_of, train_spm

ES = ["en el principio crió dios los cielos y la tierra", "y dijo dios sea la luz y fué la luz",
      "porque de tal manera amó dios al mundo", "bienaventurados los pobres en espíritu",
      "el señor es mi pastor nada me faltará", "¿quién eres tú? ¡ven aquí!"] * 5
EN = ["in the beginning god created the heavens and the earth", "god said let there be light",
      "for god so loved the world", "blessed are the poor in spirit", "the lord is my shepherd",
      "who are you? come here!"] * 5
LEFT_OUT = ("j", "▁luz", "k")            # pieces of the spm models that vocab.json lacks (read as <unk>)
SENTENCES = ["y dijo dios sea la luz", ">>es<< the lord is my shepherd", "hola 🙂 a 中文", "", "   ",
             "¿quién eres tú?", "dios  dijo", ">>es<<", ">>xx<< god said", "jajaja kilo", "the world",
             "ñandú & 42"]


def marian_vocab(pieces: list[str], first: tuple[str, ...] = ("</s>", "<unk>", ">>es<<")) -> dict[str, int]:
    vocab = {p: i for i, p in enumerate(first)}
    for p in pieces:
        if p not in vocab and p not in LEFT_OUT:
            vocab[p] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def write_files(directory: Path, src: bytes, tgt: bytes, vocab: dict, tgt_vocab: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "source.spm").write_bytes(src)
    (directory / "target.spm").write_bytes(tgt)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    if tgt_vocab is not None:
        (directory / "target_vocab.json").write_text(json.dumps(tgt_vocab, ensure_ascii=False), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    return directory


def hf_tokenizer(directory: Path):
    from transformers import MarianTokenizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # "Recommended: pip install sacremoses."
        return MarianTokenizer.from_pretrained(str(directory))


@pytest.fixture(scope="module")
def models() -> tuple[bytes, bytes]:
    return train_spm(ES, 70), train_spm(EN, 60)


@pytest.fixture(scope="module")
def marian_dir(models, tmp_path_factory) -> Path:
    src, tgt = models
    return write_files(tmp_path_factory.mktemp("marian"), src, tgt, marian_vocab(pieces_of(src) + pieces_of(tgt)))


@pytest.fixture(scope="module")
def tok(marian_dir) -> VocabTokenizer:
    return VocabTokenizer.load(marian_dir)


@pytest.fixture(scope="module")
def hf(marian_dir):
    return hf_tokenizer(marian_dir)


def vocab_bytes(data) -> bytes:
    return json.dumps(data).encode() if not isinstance(data, bytes) else data


# ---- the same ids and text as transformers.MarianTokenizer ------------------------------------------

def test_the_fixture_exercises_what_it_should(tok, hf):
    """Unknown pieces, spm-unknown characters and the language code really occur in SENTENCES."""
    ids = [i for s in SENTENCES for i in hf(s)["input_ids"]]
    assert tok.special.unk in ids and hf.convert_tokens_to_ids(">>es<<") in ids
    assert any(tok.encode(s) != tok.encode(s, "tgt") for s in SENTENCES)        # two spm models segment


@pytest.mark.parametrize("text", SENTENCES)
def test_source_ids_equal_marian_tokenizers(tok, hf, text):
    assert tok.encode(text, "src") + [tok.special.eos] == hf(text)["input_ids"]
    assert encoding.source_ids(tok, text, 512, tok.special) == hf(text)["input_ids"]


@pytest.mark.parametrize("text", SENTENCES)
def test_target_ids_equal_marian_tokenizers(tok, hf, text):
    assert encoding.output_ids(tok, text, 512, tok.special) == hf(text_target=text)["input_ids"]


@pytest.mark.parametrize("text", SENTENCES)
def test_decode_equals_marian_tokenizers_without_special_tokens(tok, hf, text):
    for ids in (hf(text)["input_ids"], hf(text_target=text)["input_ids"]):
        with_start = [tok.special.start] + ids + [tok.special.pad]
        assert tok.decode(with_start, "tgt") == hf.decode(with_start, skip_special_tokens=True)


def test_separate_target_vocabulary(models, tmp_path):
    src, tgt = models
    pieces = pieces_of(src) + pieces_of(tgt)
    tgt_vocab = marian_vocab(pieces_of(tgt), first=("</s>", "<unk>"))
    path = write_files(tmp_path, src, tgt, marian_vocab(pieces), tgt_vocab)
    tok, hf = VocabTokenizer.load(path), hf_tokenizer(path)
    assert (tok.src_vocab_size, tok.tgt_vocab_size) == (len(marian_vocab(pieces)), len(tgt_vocab))
    assert tok.src_vocab_size != tok.tgt_vocab_size
    assert tok.files == ["source.spm", "target.spm", "target_vocab.json", "vocab.json"]
    for text in SENTENCES:
        assert tok.encode(text, "src") + [0] == hf(text)["input_ids"]
        ids = hf(text_target=text)["input_ids"]
        assert tok.encode(text, "tgt") + [0] == ids
        assert tok.decode(ids, "tgt") == hf.decode(ids, skip_special_tokens=True)


def test_special_ids_come_from_the_vocabulary(tok, marian_dir):
    last = len(json.loads((marian_dir / "vocab.json").read_text())) - 1
    assert tok.special == SpecialIds(pad=last, unk=1, start=last, eos=0)
    assert [tok.id_to_piece(i) for i in (0, 1, 2, last)] == ["</s>", "<unk>", ">>es<<", "<pad>"]
    assert tok.src_vocab_size == tok.tgt_vocab_size == last + 1 and not tok.joint
    with pytest.raises(IndexError, match="outside"):
        tok.id_to_piece(last + 1)
    with pytest.raises(ValueError, match="side"):
        tok.encode("x", side="source")


def test_unknown_names_the_parts_read_as_unk(tok):
    assert tok.unknown("hola 🙂 a 中文") == ["🙂", "中文"]
    assert tok.unknown("y dijo dios") == ["j"]                     # segmented, but not in vocab.json
    assert tok.unknown(">>xx<< dios") == [">>xx<<"]                # a language code vocab.json lacks
    assert tok.unknown(">>es<< dios es la tierra") == []
    assert tok.unknown("sea la luz") == ["luz"] and tok.unknown("sea la luz", "tgt") == []     # ▁luz left out
    assert tok.pieces("🙂 dios")[1] == "<unk>" and len(tok.pieces("🙂 dios")) == len(tok.encode("🙂 dios"))


# ---- files: save, load, pickle, and untrusted input -------------------------------------------------

def test_save_load_and_pickle_keep_everything(tok, tmp_path):
    assert tok.save(tmp_path / "out") == ["source.spm", "target.spm", "vocab.json"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == tok.files      # no temporary files left
    for other in (load_tokenizer(tmp_path / "out"), pickle.loads(pickle.dumps(tok))):
        assert isinstance(other, VocabTokenizer) and other.model_bytes() == tok.model_bytes()
        assert [other.encode(s) for s in SENTENCES] == [tok.encode(s) for s in SENTENCES]
        assert other.special == tok.special


def test_load_tokenizer_still_reads_sentencepiece_tokenizers(tmp_path):
    Tokenizer.train(EN, ES, str(tmp_path), vocab_size=60)
    assert type(load_tokenizer(tmp_path)) is Tokenizer


BAD_VOCABS = {
    "not an object": ([["</s>", 0]], "expected a JSON object"),
    "not JSON": (b"{\"</s>\": 0,", "not valid JSON"),
    "an id of 5,000 digits": (b'{"</s>": ' + b"9" * 5000 + b"}", r"not valid JSON \(a number too long to read\)$"),
    "nested too deep": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    # counted before parsing: 63 MB of `[{},...]`, within the byte bound, took 4.4 GB to parse
    "4 million values": (b"[" + b"{}," * 2_000_000 + b"{}]", "4,000,00\\d JSON values or more, where at most 2,000,000"),
    "an id not an integer": ({"</s>": 0, "<unk>": "1", "<pad>": 2}, "ids must be integers"),
    "a boolean id": ({"</s>": 0, "<unk>": True, "<pad>": 2}, "ids must be integers"),
    "a duplicate id": ({"</s>": 0, "<unk>": 1, "a": 1, "<pad>": 2}, r"id 1 is used twice \('<unk>' and 'a'\)"),
    "a gap": ({"</s>": 0, "<unk>": 1, "<pad>": 3}, r"exactly 0..2 with no gaps; id 2 is missing"),
    "a negative id": ({"</s>": -1, "<unk>": 1, "<pad>": 2}, "id 0 is missing and -1 is out of range"),
    "no </s>": ({"<unk>": 0, "a": 1, "<pad>": 2}, "special piece.*</s> missing"),
    "no <pad>": ({"</s>": 0, "<unk>": 1}, "special piece.*<pad> missing"),
}


@pytest.mark.parametrize("kind", list(BAD_VOCABS))
def test_a_bad_vocab_json_is_refused_with_a_clear_message(kind, models, tmp_path):
    data, message = BAD_VOCABS[kind]
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    (tmp_path / "vocab.json").write_bytes(vocab_bytes(data))
    with pytest.raises(ValueError, match=r"vocab\.json: .*" + message):
        VocabTokenizer.load(tmp_path)


def test_a_vocab_json_with_a_byte_order_mark_is_read_as_other_json_files_are(models, tmp_path):
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    (tmp_path / "vocab.json").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "vocab.json").read_bytes())
    assert VocabTokenizer.load(tmp_path).special == SpecialIds(pad=2, unk=1, start=2, eos=0)


@pytest.mark.parametrize("data", [bytes(range(256)) * 4, b"", None], ids=["garbage", "empty", "truncated"])
def test_a_damaged_sentencepiece_file_is_said_in_words(models, tmp_path, data):
    """sentencepiece's own words were its C++ source line: 'INTERNAL: src/sentencepiece_processor.cc(109)'."""
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    (tmp_path / "source.spm").write_bytes(models[0][: len(models[0]) // 2] if data is None else data)
    with pytest.raises(ValueError) as err:
        VocabTokenizer.load(tmp_path)
    assert str(err.value) == "source.spm: not a sentencepiece model (damaged or of another kind)"


@pytest.mark.parametrize("name", ["source.spm", "vocab.json", "target_vocab.json"])
@pytest.mark.parametrize("odd, said", [("folder", "a directory"), ("/dev/zero", "a character device")])
def test_a_tokenizer_file_that_is_a_folder_or_a_device_is_said_as_such_never_read(models, tmp_path, monkeypatch,
                                                                                    name, odd, said):
    """It was 'missing source.spm' (and a target_vocab.json folder was passed over: the shared vocabulary)."""
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    (tmp_path / name).unlink(missing_ok=True)
    (tmp_path / name).mkdir() if odd == "folder" else (tmp_path / name).symlink_to(odd)
    monkeypatch.setattr("os.open", lambda *a, **k: pytest.fail(f"opened {a[0]}"))
    with pytest.raises(ValueError) as err:
        VocabTokenizer.load(tmp_path, confined=False)
    assert str(err.value) == f"{tmp_path / name}: {said}, not a regular file"


def test_special_ids_must_agree_between_the_two_vocabularies(models, tmp_path):
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2}, {"<unk>": 0, "</s>": 1, "<pad>": 2})
    with pytest.raises(ValueError, match=r"target_vocab.json: </s> and <unk> have ids \(1, 0\), but \(0, 1\)"):
        VocabTokenizer.load(tmp_path)


@pytest.mark.parametrize("name", ["vocab.json", "source.spm", "target_vocab.json"])
def test_an_oversize_file_is_refused_before_it_is_read(name, models, tmp_path, monkeypatch):
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    with open(tmp_path / name, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)                                          # sparse: no disk used
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail(f"opened {a[0]}"))
    with pytest.raises(ValueError, match=f"{name}: 67,108,865 bytes is more than the 67,108,864 allowed"):
        VocabTokenizer.load(tmp_path)


def test_missing_or_broken_files(models, tmp_path):
    write_files(tmp_path, *models, {"</s>": 0, "<unk>": 1, "<pad>": 2})
    (tmp_path / "target.spm").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="target.spm: not a sentencepiece model"):
        VocabTokenizer.load(tmp_path)
    (tmp_path / "source.spm").unlink()
    with pytest.raises(FileNotFoundError, match="missing source.spm"):
        VocabTokenizer.load(tmp_path)
    with pytest.raises(ValueError, match="expected source.spm"):
        VocabTokenizer({"vocab.json": b"{}"})


# ---- checkpoints and the model's special ids --------------------------------------------------------

def marian_model(tok: VocabTokenizer) -> Transformer:
    s = tok.special
    cfg = ModelConfig(src_vocab_size=tok.src_vocab_size, tgt_vocab_size=tok.tgt_vocab_size, d_model=16, n_heads=2,
                      d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=64,
                      pad_id=s.pad, eos_id=s.eos, unk_id=s.unk, decoder_start_id=s.start)
    torch.manual_seed(0)
    return Transformer(cfg).eval()


def test_a_checkpoint_with_marian_files_loads_them(tok, tmp_path):
    """The real loader, not conftest's stand-in (this test does not ask for fake_tokenizer)."""
    model = marian_model(tok)
    path = save_checkpoint(tmp_path / "ck", model, tok, meta={"name": "marian"})
    meta = json.loads((path / "config.json").read_text())
    assert meta["tokenizer"] == {"files": ["source.spm", "target.spm", "vocab.json"], "joint": False}
    loaded = load_checkpoint(path)
    assert isinstance(loaded.tokenizer, VocabTokenizer) and loaded.config.special == tok.special
    assert loaded.tokenizer.encode(SENTENCES[0]) == tok.encode(SENTENCES[0])


def test_a_checkpoint_whose_model_disagrees_with_the_vocabulary_is_refused(tok, tmp_path):
    model = marian_model(tok)
    path = save_checkpoint(tmp_path / "ck", model, tok, meta={})
    config = json.loads((path / "config.json").read_text())
    config["model"].update(eos_id=3, unk_id=1, pad_id=0, decoder_start_id=2)       # this project's ids
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"pad, unk and eos ids \(\d+, 1, 0\) differ .* \(0, 1, 3\)"):
        load_checkpoint(path)


def test_the_attention_pages_end_of_sentence_key_is_the_models_eos(tok):
    from webapp.views.attention import eos_key
    model = marian_model(tok)
    src = encoding.source_ids(tok, "dios dijo", 64, tok.special)
    out = encoding.output_ids(tok, "god said", 64, tok.special)
    trace = attention_trace(model, tok, src, out)
    assert src[-1] == 0 and trace.meta["eos_id"] == 0
    assert eos_key(trace, "cross") == eos_key(trace, "encoder") == len(src) - 1
    assert trace.src_tokens[-1] == "</s>"
