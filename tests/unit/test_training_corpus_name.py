"""A checkpoint's training pairs are its own: a fine-tune records the name of the corpus it was trained on
(a user's file's name carries its content's key), a file edited since is refused rather than read as the
checkpoint's training data, and two fine-tunes on two files each get an index of their own file only."""
from __future__ import annotations

import pytest

from explorer.data import corpus_name, load_corpus
from explorer.store.run_paths import RUNS_ENV
from explorer.studies.common.training_data import NoTrainingData, dataset_of, training_pairs
from explorer.studies.grounding import build

APPLES = "".join(f"the apple number {i}\tder apfel nummer {i}\n" for i in range(40))
RIVERS = "".join(f"a river called {i}\tein fluss namens {i}\n" for i in range(40))


def meta_for(path, recorded: bool = True) -> dict:
    training = {"dataset": str(path)}
    if recorded:
        training["corpus"] = load_corpus(str(path)).name          # what the trainer writes
    return {"training": training, "src_lang": "en", "tgt_lang": "de"}


def test_a_files_corpus_name_follows_its_content_and_a_built_in_keeps_its_name(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(APPLES)
    first = corpus_name(str(path))
    assert first == load_corpus(str(path)).name                   # the name the built corpus carries
    assert corpus_name(str(path)) == first
    path.write_text(RIVERS)
    assert corpus_name(str(path)) != first
    assert corpus_name("numbers") == "numbers" and corpus_name("bible") == "bible"
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\nthree\n")
    tgt.write_text("eins\nzwei\ndrei\n")
    moses = corpus_name(f"{src},{tgt}")
    tgt.write_text("eins\nzwei\nvier\n")
    assert corpus_name(f"{src},{tgt}") != moses


def test_a_file_edited_since_training_is_refused_in_one_line(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(APPLES)
    meta = meta_for(path)
    assert dataset_of(meta) == str(path)
    assert any("apple" in p.src for p in training_pairs(meta))
    path.write_text(RIVERS)
    for read in (dataset_of, training_pairs):
        with pytest.raises(NoTrainingData) as err:
            read(meta)
        assert "has changed since it was trained" in str(err.value) and "\n" not in str(err.value)
    path.unlink()
    with pytest.raises(NoTrainingData, match="unreadable"):
        dataset_of(meta)


def test_two_fine_tunes_each_index_their_own_file_and_an_edited_file_is_counted_again(tmp_path, monkeypatch):
    monkeypatch.setenv(RUNS_ENV, str(tmp_path / "runs"))
    apples, rivers = tmp_path / "apples.tsv", tmp_path / "rivers.tsv"
    apples.write_text(APPLES)
    rivers.write_text(RIVERS)
    first = build.ensure(tmp_path, meta_for(apples))
    second = build.ensure(tmp_path, meta_for(rivers))
    assert "apple" in first.src_words and "river" not in first.src_words
    assert "river" in second.src_words and "apple" not in second.src_words
    assert build.ensure(tmp_path, meta_for(apples)).src_words == first.src_words        # kept, read back
    apples.write_text(RIVERS.replace("river", "lake"))                                   # the same path, edited
    again = build.ensure(tmp_path, meta_for(apples, recorded=False))                      # a run that recorded no name
    assert "lake" in again.src_words and "apple" not in again.src_words
