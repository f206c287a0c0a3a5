"""Grounded or guessing: the words counted, the index file read as untrusted input, the word-pair model a
distribution, the verdict and its calibration, the command, on small corpora built here."""
from __future__ import annotations

import gzip
import json
import math
import os
from types import SimpleNamespace as Pair

import pytest

from explorer.files import limits
from explorer.studies.grounding import index as ix
from explorer.studies.grounding.__main__ import main as grounding_main, read_sources
from explorer.studies.grounding.verdict import QUANTILE, calibrate, other_language, score, verdict
from explorer.studies.common.words import bigrams, names, span_word, words
from support.app_support import NUMBERS

TRAIN = [Pair(src="y dijo el rey a su siervo", tgt="and the king said to his servant"),
         Pair(src="el rey fue a la casa", tgt="the king went to the house"),
         Pair(src="y el siervo dijo al rey", tgt="and the servant said to the king")] * 5


def small_index() -> ix.TrainingIndex:
    return ix.count(TRAIN, "small", "es", "en")


def test_words_are_lowercased_letters_and_digits_in_one_normal_form():
    assert words("¿Dónde está la casa 42?") == ["dónde", "está", "la", "casa", "42"]
    assert words("esta\u0301") == words("está")                           # a combining accent is the same word
    assert bigrams(["a", "b", "c"]) == ["a b", "b c"]


def test_a_pieces_word_runs_from_its_start_and_ends_at_the_tokenizers_own_pieces():
    pieces = ["▁twenty", "▁on", "e", "</s>"]
    assert [span_word(pieces, p) for p in range(4)] == ["twenty", "one", "one", ""]   # the end is no piece of "one"
    assert [span_word(["▁la", "<unk>", "s", "▁casa", "."], p) for p in range(5)] == ["la", "", "s", "casa", "casa"]
    assert span_word(["▁one", "</s>", "<pad>"], 2) == "" and span_word(["▁Día", "s"], 1) == "días"


def test_names_are_capitals_inside_a_sentence_not_at_its_start():
    text = "Y dijo Jehová a Moisés: Sube. «Aarón vendrá» con Pedro."
    found = [words(text)[i] for i in sorted(names(text))]
    assert found == ["jehová", "moisés", "pedro"]


def test_the_word_pair_model_is_a_distribution():
    """For any previous word: the probabilities of the training words plus one unseen word's sum to 1.
    Python floats (float64) over a dozen words: the sum's rounding is under 1e-15, far inside rel_tol 1e-12,
    while a wrong weight or denominator moves it by more than 1e-3."""
    model = small_index().bigram_model()
    for previous in (None, "rey", "y", "nunca"):
        total = sum(model.probability(previous, w) for w in model.unigrams)
        assert math.isclose(total + model.probability(previous, "palabra-nueva"), 1.0, rel_tol=1e-12), previous


def test_unseen_words_and_new_neighbours_cost_more_and_names_nothing():
    index = small_index()
    seen, reordered, unseen = "el rey dijo a su siervo", "siervo su a dijo rey el", "el presidente habló con periodistas"
    assert score(index, seen) < score(index, reordered) < score(index, unseen)
    assert score(index, "el rey dijo a Pedro") == pytest.approx(score(index, "el rey dijo a"))


def test_calibration_uses_a_quantile_or_in_a_closed_domain_the_highest_score():
    index = calibrate(small_index(), ["el rey dijo", "y el siervo fue a la casa", "a su siervo"], "test")
    assert index.calibration["rule"] == "highest held-out score (closed vocabulary)"
    # the threshold is kept to 6 decimals (round: within 5e-7 of the score), hence abs=1e-6
    assert index.threshold == pytest.approx(max(score(index, s) for s in ("el rey dijo", "y el siervo fue a la casa",
                                                                           "a su siervo")), abs=1e-6)
    held = ["el rey dijo", "el profeta habló", "y el siervo fue", "la mujer del pueblo", "a su siervo"] * 4
    index = calibrate(small_index(), held, "test")
    assert index.calibration["rule"] == f"quantile {QUANTILE}" and index.calibration["above"] <= 1 - QUANTILE + 1e-9


def test_the_verdict_names_unseen_words_and_the_other_language():
    index = calibrate(small_index(), ["el rey dijo", "a su siervo"], "test")
    guess = verdict(index, "El presidente habló con los periodistas", "m")
    assert guess.guessing and guess.summary.startswith("5 of 6 words never appear")
    assert [w.word for w in guess.words if w.seen == "never"] == ["presidente", "habló", "con", "los", "periodistas"]
    grounded = verdict(index, "El rey dijo a su siervo", "m")
    assert grounded.guessing is False and "the model has seen text like this" in grounded.summary
    english = verdict(index, "the king said to the servant", "m")
    assert english.other_language == "English" and english.guessing and "reads as English" in english.summary
    assert other_language(index, "el rey dijo a su siervo") is None


def test_a_sentence_no_guess_as_a_whole_is_partly_one_from_a_word_in_five_it_never_saw():
    """"¿Dónde está la estación?" was called grounded (its surprise and distance below the threshold) over "Where
    is the portion?": a word in four the data never showed. Names are left out, as the surprise leaves them."""
    index = small_index()
    index.threshold = 100.0                                   # no sentence here is a guess as a whole
    partly = verdict(index, "el rey dijo a la estación", "m")   # 1 of 6 words: under a fifth
    assert not partly.partly and partly.unknown == ("estación",)
    assert partly.summary == "1 of 6 words never appears in the 15 training pairs of m."
    for text, unknown in (("el rey dijo la estación", ("estación",)),           # 1 of 5: a fifth
                          ("el rey habló con Pedro", ("habló", "con"))):        # 2 of 4 weighed, Pedro a name
        found = verdict(index, text, "m")
        assert found.partly and found.guessing is False and found.unknown == unknown
        assert found.summary.endswith("is a guess, though the rest reads like its training data.")
        assert ", ".join(f"'{w}'" for w in unknown) in found.summary
    # the count is the rule's, names left out: it said "3 of 5 words" and named two
    assert verdict(index, "el rey habló con Pedro", "m").summary.startswith(
        "2 of 4 words, names left out, never appear in")
    assert verdict(index, "el rey dijo la estación", "m").summary.startswith("1 of 5 words never appears in")
    assert not verdict(index, "el rey dijo a Pedro", "m").partly                  # a name it never saw: copied
    # the count is of words, the list names each once: a word counted twice says so
    twice = verdict(index, "la estación y la estación", "m")
    assert twice.partly and twice.unknown == ("estación",)
    assert twice.summary.startswith("2 of 5 words never appear in") and "'estación' (2 times) is a guess" in twice.summary
    index.threshold = 0.0
    guess = verdict(index, "el rey habló", "m")
    assert guess.guessing and not guess.partly                # a guess as a whole is no partial one
    assert not verdict(index, "the king said to the servant", "m").partly       # the other language: a guess


def test_a_records_threshold_says_which_value_it_is_for():
    """A record put the surprise (7.45 nats) beside the combined value's threshold (2.15): a reader comparing
    the two read every sentence as over it. threshold_of names the value the threshold is for."""
    from dataclasses import replace

    index = small_index()
    index.threshold = 3.0
    alone = verdict(index, "el rey dijo", "m")
    assert alone.to_json()["threshold_of"] == "score" and alone.to_json()["threshold"] == 3.0
    both = replace(alone, combined=0.4, threshold=2.15)
    assert both.to_json()["threshold_of"] == "combined"


def test_an_index_round_trips_and_a_hostile_file_is_refused_in_one_line(tmp_path):
    index = calibrate(small_index(), ["el rey dijo"], "test")
    path = ix.save(index, tmp_path / "i.json.gz")
    back = ix.load(path)
    assert back.to_json() == index.to_json() and back.threshold == index.threshold
    bomb = tmp_path / "bomb.json.gz"                        # 200 KB that inflates past the bound
    bomb.write_bytes(gzip.compress(b" " * (limits.INDEX_JSON_BYTES + 1), compresslevel=9))
    os.mkfifo(tmp_path / "fifo.json.gz")
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    record = index.to_json()
    record["threshold"] = 1e9
    (tmp_path / "range.json.gz").write_bytes(gzip.compress(json.dumps(record).encode()))
    record = index.to_json()
    record["src_words"] = {"rey": -3}
    (tmp_path / "counts.json.gz").write_bytes(gzip.compress(json.dumps(record).encode()))
    for name, why in (("bomb", "inflates to more than"), ("fifo", "FIFO"), ("bad", "not a gzip file"),
                      ("range", "threshold must be"), ("counts", "positive counts")):
        with pytest.raises(ix.IndexUnusable, match=why) as refused:
            ix.load(tmp_path / f"{name}.json.gz")
        assert "\n" not in str(refused.value)


def test_the_command_input_is_lines_or_a_tsv_source_column(tmp_path):
    (tmp_path / "lines.txt").write_text("uno\n\ndos\n")
    (tmp_path / "pairs.tsv").write_text("id\tsource\treference\n1\tuno\tone\n2\tdos\ttwo\n")
    assert read_sources(str(tmp_path / "lines.txt")) == ["uno", "dos"]
    assert read_sources(str(tmp_path / "pairs.tsv")) == ["uno", "dos"]
    with pytest.raises(ValueError, match="no sentences"):
        (tmp_path / "empty.txt").write_text("\n\n")
        read_sources(str(tmp_path / "empty.txt"))


def test_the_command_writes_the_verdict_the_app_shows(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("three hundred and forty-two\nmy sister works in a hospital\n")
    out = tmp_path / "g.json"
    assert grounding_main([str(NUMBERS), "--input", str(tmp_path / "in.txt"), "--out", str(out), "--beam", "1"]) == 0
    result = json.loads(out.read_text())
    rows = result["sentences"]
    assert [r["guessing"] for r in rows] == [False, True]
    assert rows[0]["output"] and {"source", "output", "guessing", "score", "words", "summary"} <= set(rows[0])
    assert result["index"]["calibration"]["rule"].startswith("highest held-out score")
    assert "1 of 2 sentences called guesses, 0 partly" in capsys.readouterr().out


def test_the_report_names_the_threshold_the_verdict_used():
    from explorer.studies.grounding.job import report
    rows = [{"guessing": True, "partly": False}, {"guessing": False, "partly": True}, {"guessing": False}]
    words_only = {"index": {"threshold": 3.25}, "states": None, "sentences": rows}
    assert report(words_only) == "1 of 3 sentences called guesses, 1 partly (threshold 3.25)"
    both = {**words_only, "states": {"threshold": 10.48, "score_mean": 1.0}}
    said = report(both)
    assert "threshold 10.48 on the training words and the encoder states combined" in said and "3.25" in said
