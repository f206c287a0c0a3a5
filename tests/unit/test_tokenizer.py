"""Tokenizer: special ids, round trip, joint vs separate, word model, save/load, pickle."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import sentencepiece as spm

from explorer.files import limits
from explorer.text.tokenizer import Tokenizer, piece_count

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints"

SRC = ["en el principio crió dios los cielos y la tierra", "y dijo dios sea la luz y fué la luz",
       "porque de tal manera amó dios al mundo", "bienaventurados los pobres en espíritu"] * 30
TGT = ["in the beginning god created the heavens and the earth", "god said let there be light",
       "for god so loved the world", "blessed are the poor in spirit"] * 30


@pytest.fixture(scope="module")
def joint(tmp_path_factory):
    return Tokenizer.train(SRC, TGT, str(tmp_path_factory.mktemp("tok")), vocab_size=120)


def test_special_ids(joint):
    assert (Tokenizer.PAD, Tokenizer.UNK, Tokenizer.BOS, Tokenizer.EOS) == (0, 1, 2, 3)
    assert [joint.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_round_trip_without_bos_eos(joint):
    text = "dios creó la luz"
    ids = joint.encode(text)
    assert ids and all(i > 3 for i in ids)
    assert joint.decode(ids, side="src") == text
    assert joint.decode([Tokenizer.BOS] + ids + [Tokenizer.EOS, 0, 0], side="src") == text
    assert "".join(joint.pieces(text)).replace("▁", " ").strip() == text


def test_joint_files_and_sizes(joint, tmp_path):
    assert joint.joint and joint.files == ["tokenizer.model"]
    assert joint.src_vocab_size == joint.tgt_vocab_size == 120
    assert joint.encode("god", "src") == joint.encode("god", "tgt")
    assert joint.save(str(tmp_path)) == ["tokenizer.model"]
    again = Tokenizer.load(str(tmp_path))
    assert again.encode("the world") == joint.encode("the world")


def test_separate_models(tmp_path):
    tok = Tokenizer.train(SRC, TGT, str(tmp_path), vocab_size=80, joint=False)
    assert not tok.joint and tok.files == ["src.model", "tgt.model"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.model", "tgt.model"]
    loaded = Tokenizer.load(str(tmp_path))
    assert not loaded.joint
    assert loaded.decode(loaded.encode("the world", "tgt"), "tgt") == "the world"
    # the source model never saw English-only words as whole pieces
    assert len(loaded.encode("heavens", "src")) > len(loaded.encode("heavens", "tgt"))


def test_word_model_small_vocab():
    tok = Tokenizer.train(["twenty one", "one hundred and five"] * 20,
                          ["ein und zwanzig", "ein hundert fünf"] * 20, None,
                          vocab_size=8000, model_type="word")
    assert tok.pieces("one hundred and five") == ["▁one", "▁hundred", "▁and", "▁five"]
    assert tok.decode(tok.encode("ein und zwanzig", "tgt")) == "ein und zwanzig"
    assert tok.src_vocab_size < 100


def test_pickle_keeps_working(joint):
    clone = pickle.loads(pickle.dumps(joint))
    assert clone.encode("the earth") == joint.encode("the earth")
    assert clone.files == joint.files


def test_load_missing_names_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.model.*src.model and tgt.model"):
        Tokenizer.load(str(tmp_path))


def test_bad_side(joint):
    with pytest.raises(ValueError, match="side"):
        joint.encode("x", side="source")


def test_unknown_names_what_the_vocabulary_cannot_represent():
    root = Path(__file__).resolve().parents[2] / "checkpoints"
    if not (root / "bible-es-en").is_dir() or not (root / "numbers-en-de").is_dir():
        pytest.skip("needs the shipped checkpoints")
    bpe, words = Tokenizer.load(str(root / "bible-es-en")), Tokenizer.load(str(root / "numbers-en-de"))
    assert bpe.unknown("Y dijo Dios 🙂 a 中文") == ["🙂", "中文"]
    assert bpe.unknown("Y dijo Dios: Sea la luz") == []
    assert words.unknown("one million and two") == ["million"]          # out of a word-level vocabulary
    assert words.unknown("three hundred and two") == []


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_a_vocabulary_smaller_than_the_texts_characters_is_refused_in_one_line(model_type):
    """sentencepiece's own refusal is a C++ RuntimeError with its source line; it is said as a ValueError
    naming the size the text needs (the letters a-z, digits and the special pieces: more than 16)."""
    lines = [f"word{i} abcdefghijklmnopqrstuvwxyz" for i in range(50)]
    with pytest.raises(ValueError, match=r"^a vocabulary of 16 pieces is smaller than the (\d+) this text needs.*"
                                         r"at least \1$") as refused:
        Tokenizer.train(lines, lines, None, vocab_size=16, model_type=model_type)
    assert "\n" not in str(refused.value) and ".cc" not in str(refused.value)


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated"])
def test_a_damaged_model_file_is_said_in_words(joint, tmp_path, damage):
    """sentencepiece's own words were 'INTERNAL: src/sentencepiece_processor.cc(109) [model_proto->...]'."""
    whole = joint.model_bytes()["tokenizer.model"]
    data = {"garbage": bytes(range(256)) * 4, "empty": b"", "truncated": whole[: len(whole) // 2]}[damage]
    (tmp_path / "tokenizer.model").write_bytes(data)
    with pytest.raises(ValueError) as err:
        Tokenizer.load(str(tmp_path))
    assert str(err.value) == "tokenizer.model: not a sentencepiece model (damaged or of another kind)"


@pytest.mark.parametrize("model", ["joint", *sorted(p.parent.name for p in SHIPPED.glob("*/tokenizer.model"))])
def test_the_pieces_counted_in_the_file_are_the_pieces_sentencepiece_reads(joint, model):
    import sentencepiece as spm
    data = (joint.model_bytes()["tokenizer.model"] if model == "joint"
            else (SHIPPED / model / "tokenizer.model").read_bytes())
    assert piece_count(data, limits.TOKENIZER_PIECES) == spm.SentencePieceProcessor(model_proto=data).get_piece_size()


def test_a_model_of_more_pieces_than_any_vocabulary_is_refused_before_sentencepiece_reads_it(joint, tmp_path,
                                                                                              monkeypatch):
    """60 MB holding 3.5M pieces took sentencepiece 1.5 GB before it was refused: now refused from a count of the
    file's pieces, one more than the bound here (the bound lowered to this model's own count)."""
    from explorer.config.checks import MODEL_LIMITS
    assert limits.TOKENIZER_PIECES == MODEL_LIMITS["src_vocab_size"] == MODEL_LIMITS["tgt_vocab_size"]
    joint.save(str(tmp_path))
    monkeypatch.setattr(limits, "TOKENIZER_PIECES", joint.src_vocab_size)
    assert Tokenizer.load(str(tmp_path)).src_vocab_size == joint.src_vocab_size             # as many as the bound: read
    monkeypatch.setattr(limits, "TOKENIZER_PIECES", joint.src_vocab_size - 1)
    monkeypatch.setattr(spm.SentencePieceProcessor, "LoadFromSerializedProto", None)   # never reached
    with pytest.raises(ValueError) as err:
        Tokenizer.load(str(tmp_path))
    assert str(err.value) == (f"tokenizer.model: holds more than {joint.src_vocab_size - 1:,} pieces, more than any "
                              "model's vocabulary may have (TOKENIZER_PIECES in explorer/files/limits.py)")


def test_a_file_of_many_fields_besides_pieces_is_no_model_and_costs_no_walk_through_it(joint, monkeypatch):
    """Pieces are counted by walking the file's fields: 64 MB of two-byte fields would have been 32M steps of
    Python before sentencepiece refused them. A model holds four fields besides its pieces."""
    from explorer.text.tokenizer import OTHER_FIELDS, sentencepiece_model
    model = joint.model_bytes()["tokenizer.model"]
    assert piece_count(b"\x08\x00" * (OTHER_FIELDS - 4) + model, 1 << 20) == joint.src_vocab_size   # 4: its own
    monkeypatch.setattr(spm.SentencePieceProcessor, "LoadFromSerializedProto", None)   # never reached
    with pytest.raises(ValueError, match=r"^x\.model: not a sentencepiece model \(damaged or of another kind\)$"):
        sentencepiece_model("x.model", b"\x08\x00" * (32 << 20) + model)


@pytest.mark.parametrize("odd, said", [("folder", "a directory"), ("/dev/zero", "a character device")])
def test_a_model_file_that_is_a_folder_or_a_device_is_said_as_such_never_read(tmp_path, monkeypatch, odd, said):
    """It was 'missing tokenizer.model (joint) or src.model and tgt.model (separate)'."""
    path = tmp_path / "tokenizer.model"
    path.mkdir() if odd == "folder" else path.symlink_to(odd)
    monkeypatch.setattr("os.open", lambda *a, **k: pytest.fail(f"opened {a[0]}"))
    with pytest.raises(ValueError) as err:
        Tokenizer.load(str(tmp_path))
    assert str(err.value) == f"{path}: {said}, not a regular file"
