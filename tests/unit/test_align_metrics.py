"""Alignment error rate by hand, the gold format, extraction rules, symmetrisation, numbers gold."""
import pytest

from explorer.studies.align.gold import GoldError, GoldPair, format_gold, parse_gold, read_gold
from explorer.studies.align.metrics import extract_links, grow_diag_final_and, score_links
from explorer.studies.align.numbers_gold import number_gold

import numpy as np


def pair(sure, possible=(), n=4):
    return GoldPair(src=[f"s{i}" for i in range(n)], tgt=[f"t{j}" for j in range(n)],
                    sure=frozenset(sure), possible=frozenset(set(possible) | set(sure)))


def test_all_sure_links_found_gives_aer_zero():
    gold = [pair({(0, 0), (1, 1)}, {(2, 3)})]
    score = score_links(gold, [{(0, 0), (1, 1)}])
    assert (score.precision, score.recall, score.aer) == (1.0, 1.0, 0.0)


def test_empty_prediction_gives_aer_one():
    score = score_links([pair({(0, 0), (1, 1)})], [set()])
    assert (score.precision, score.recall, score.aer) == (0.0, 0.0, 1.0)


def test_possible_links_counted_as_och_and_ney_define():
    gold = [pair({(0, 0)}, {(1, 1)})]              # S = {00}, P = {00, 11}
    # A = {11}: a possible link is not an error in precision, but recall counts sure links only
    only_possible = score_links(gold, [{(1, 1)}])
    assert only_possible.precision == 1.0 and only_possible.recall == 0.0
    assert only_possible.aer == pytest.approx(1 - (0 + 1) / (1 + 1))
    # A = {00, 22}: one sure hit, one link outside P
    one_wrong = score_links(gold, [{(0, 0), (2, 2)}])
    assert one_wrong.precision == 0.5 and one_wrong.recall == 1.0
    assert one_wrong.aer == pytest.approx(1 - (1 + 1) / (2 + 1))
    # A = S + the possible link: nothing lost
    assert score_links(gold, [{(0, 0), (1, 1)}]).aer == 0.0


def test_counts_are_summed_over_the_corpus_before_dividing():
    gold = [pair({(0, 0)}), pair({(0, 0), (1, 1), (2, 2)})]
    score = score_links(gold, [{(0, 0)}, set()])
    assert score.recall == pytest.approx(1 / 4) and score.aer == pytest.approx(1 - 2 / 5)


def test_gold_line_round_trip_and_sure_in_possible():
    text = "# a comment\nla casa ||| the house ||| 0-0 1-1 0?1\n\nY ||| And ||| \n"
    pairs = parse_gold(text)
    assert len(pairs) == 2
    assert pairs[0].sure == {(0, 0), (1, 1)} and pairs[0].possible == {(0, 0), (1, 1), (0, 1)}
    assert pairs[1].sure == frozenset() and pairs[1].possible == frozenset()
    assert parse_gold(format_gold(pairs, ["header"])) == pairs


@pytest.mark.parametrize("line, why", [
    ("a b ||| c ||| 2-0", "outside"), ("a ||| c ||| 0-1", "outside"), ("a ||| c ||| 0x0", "not 'i-j'"),
    ("a ||| c", "field"), ("||| c ||| ", "no words"), ("a ||| c ||| 0-0 ||| x", "field"),
    ("a ||| c ||| -1-0", "not 'i-j'")])
def test_bad_gold_lines_are_refused_with_the_line_named(line, why):
    with pytest.raises(GoldError, match=why) as err:
        parse_gold("# ok\n" + line, "g.align")
    assert "g.align line 2" in str(err.value)


def test_gold_file_saved_with_a_bom_is_read_as_without_one(tmp_path):
    """Windows editors save UTF-8 with a byte order mark: it is not part of the first line's words or
    comment, so a file with one reads exactly as the same file without it, from disk or uploaded."""
    text = "# a comment\nla casa ||| the house ||| 0-0 1-1\n"
    (tmp_path / "bom.align").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert read_gold(tmp_path / "bom.align") == parse_gold(text)
    first_line_a_pair = parse_gold("\ufeffla casa ||| the house ||| 0-0 1-1\n")
    assert first_line_a_pair[0].src == ["la", "casa"]


def test_lines_end_at_newlines_alone_and_are_numbered_as_an_editor_numbers_them():
    """CRLF reads as LF; a form feed or U+2028 inside a line is whitespace, not a line end, so the pair is
    read whole and a bad line further on is named by its editor's line number."""
    crlf = parse_gold("la casa ||| the house ||| 0-0 1-1\r\nel gato ||| the cat ||| 0-0 1-1\r\n")
    assert [p.src for p in crlf] == [["la", "casa"], ["el", "gato"]] and crlf[1].tgt == ["the", "cat"]
    spaced = parse_gold("three hundred\x0c ||| drei\u2028hundert ||| 0-0 1-1\n")
    assert spaced[0].src == ["three", "hundred"] and spaced[0].tgt == ["drei", "hundert"]
    with pytest.raises(GoldError, match="g.align line 2: "):
        parse_gold("a\x0cb ||| c ||| 0-0\nbroken line\n", "g.align")


@pytest.mark.parametrize("link", ["\u0661-\u0660", "1-\u0660", "\u0661?0", "\u0967-0", "\uff11-0", "\U0001d7cf-0"])
def test_link_indices_are_ascii_digits_only(link):
    """Python's int() reads Arabic-Indic, Devanagari, full-width and mathematical digits as numbers, so
    a link written in them would silently name a word; the format's indices are 0-9 only."""
    with pytest.raises(GoldError, match="0-9") as err:
        parse_gold("# ok\na b ||| c d ||| 0-0 " + link, "g.align")
    assert "g.align line 2" in str(err.value)


def test_gold_file_size_checked_before_reading(tmp_path, monkeypatch):
    import explorer.studies.align.gold as gold
    path = tmp_path / "big.align"
    path.write_text("a ||| b ||| 0-0\n" * 100)
    monkeypatch.setattr(gold, "MAX_BYTES", 100)
    with pytest.raises(GoldError, match="more than"):
        read_gold(path)
    (tmp_path / "bin.align").write_bytes(b"\xff\xfe ||| x ||| ")
    with pytest.raises(GoldError, match="UTF-8"):
        read_gold(tmp_path / "bin.align")


def test_extraction_rules():
    m = np.array([[0.9, 0.1, 0.0],      # target 0 -> source 0
                  [0.6, 0.3, 0.1],      # target 1 -> source 0 (but source 0 prefers target 0)
                  [0.0, 0.2, 0.8]])     # target 2 -> source 2
    assert extract_links(m, "target") == {(0, 0), (0, 1), (2, 2)}
    assert extract_links(m, "mutual") == {(0, 0), (2, 2)}
    assert extract_links(np.zeros((0, 3)), "target") == set()


def test_grow_diag_final_and_by_hand():
    fwd = {(0, 0), (1, 1), (2, 3)}
    bwd = {(0, 0), (1, 2), (3, 3)}
    # intersection {00}; grow: 11 is a diagonal neighbour of 00 aligning new words; then 12 neighbours 11
    # but both its words... source 1 is aligned, target 2 is not -> added; 23 / 33 neighbour 12 ->
    # 23 adds source 2 (target 3 new too); 33: source 3 new -> added
    assert grow_diag_final_and(fwd, bwd) == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)}
    # final-and only adds links whose both words are unaligned
    assert grow_diag_final_and({(0, 0)}, {(0, 0), (5, 5)}) == {(0, 0), (5, 5)}
    assert grow_diag_final_and({(0, 0)}, {(0, 0), (0, 5)}) == {(0, 0)}


def test_numbers_gold_follows_the_grammar():
    g = number_gold(21)
    assert (g.src, g.tgt) == (["twenty", "one"], ["ein", "und", "zwanzig"])
    assert g.sure == {(1, 0), (0, 2)} and g.possible - g.sure == {(0, 1), (1, 1)}
    g = number_gold(314)                 # three hundred and fourteen -> drei hundert vier zehn
    assert g.sure == {(0, 0), (1, 1), (3, 2), (3, 3)} and g.possible == g.sure   # "and" unaligned
    g = number_gold(301_631)             # num2words writes "dreihunderteinstausend..."
    assert g.tgt[:4] == ["drei", "hundert", "eins", "tausend"] and (3, 2) in g.sure


def test_numbers_gold_for_every_held_out_number_of_the_shipped_model():
    from explorer.data.files import read_tsv
    from explorer.files.places import REPO_ROOT
    pairs = read_tsv(str(REPO_ROOT / "checkpoints" / "numbers-en-de" / "test.tsv"))
    for p in pairs:
        g = number_gold(int(p.ref[2:]))
        assert (g.src_text, g.tgt_text) == (p.src, p.tgt)
        aligned_en = {i for i, _ in g.sure}
        assert aligned_en == {i for i, w in enumerate(g.src) if w != "and"}       # every number word has its German
        assert {j for _, j in g.possible} == set(range(len(g.tgt)))              # every German morpheme is linked
