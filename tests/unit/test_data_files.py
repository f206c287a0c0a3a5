"""Validating a user's TSV (explorer.data.files) streams it: the memory it takes does not grow with the file,
and it still names the first bad line, wherever in the file it is."""
from __future__ import annotations

import tracemalloc

import pytest

from explorer.data import files, split_held_out
from explorer.data.files import parse_tsv, read_tsv, validate_tsv
from explorer.data.types import DataError, Pair

LINE = b"hola mundo numero uno\thello world number one\n"
BIG = LINE * (20_000_000 // len(LINE))                 # about 20 MB, 450,000 pairs


def peak_bytes(call) -> tuple[object, int]:
    """What `call()` returns and the most memory it held at once (tracemalloc: bytes, not time)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_validating_20_mb_of_pairs_holds_a_small_part_of_it_in_memory(tmp_path):
    """A 50 MB upload of short lines took 3 GB (one Pair per line, only to be counted): now a block at a time."""
    report, peak = peak_bytes(lambda: validate_tsv(BIG, max_bytes=len(BIG)))
    assert report.pairs == len(BIG) // len(LINE) and report.bytes == len(BIG)
    assert report.sample == [Pair("hola mundo numero uno", "hello world number one", f"<upload>:{n}") for n in (1, 2, 3)]
    assert peak < len(BIG) // 5, f"{peak:,} bytes held to validate {len(BIG):,}"
    path = tmp_path / "big.tsv"                         # Start validates the saved file again, by its path
    path.write_bytes(BIG)
    report, peak = peak_bytes(lambda: validate_tsv(str(path)))
    assert report.pairs == len(BIG) // len(LINE) and report.bytes == len(BIG)
    assert peak < len(BIG) // 5, f"{peak:,} bytes held to validate {len(BIG):,}"


@pytest.mark.parametrize("bad, message", [(b"c\td\te\n", "expected 2 tab-separated columns, found 3"),
                                          (b"\xff\tx\n", "not valid UTF-8 \\(byte 0xff\\)"),
                                          (b"\tx\n", "the source side is empty")])
def test_a_bad_line_far_into_the_file_is_still_the_one_named(tmp_path, bad, message):
    """Blocks are cut at line breaks: the line numbers go on across them, whatever the line endings."""
    good = b"a\tb\r\n" * (3 * files._BLOCK // 5) + b"c\td\r" + b"e\tf\n" * 10    # Windows, old Mac and Unix endings
    line = good.count(b"\n") + good.count(b"\r") - good.count(b"\r\n") + 1
    data = good + bad + b"g\th\n"
    with pytest.raises(DataError, match=f"^<upload>, line {line}: {message}"):
        validate_tsv(data)
    path = tmp_path / "bad.tsv"
    path.write_bytes(data)
    with pytest.raises(DataError, match=f"line {line}: {message}"):
        read_tsv(str(path))
    pairs = parse_tsv(good)
    assert len(pairs) == line - 1 and pairs[-1].ref == f"<upload>:{line - 1}"


def test_a_line_longer_than_a_block_is_one_line(monkeypatch):
    monkeypatch.setattr(files, "_BLOCK", 1024)        # a block shorter than the longest side allowed
    long = "x" * (3 * files._BLOCK)
    pairs = parse_tsv(f"\ufeffsrc\ttgt\na\tb\n{long}\ty\nc\td".encode())
    assert [(p.src[:3], p.tgt, p.ref) for p in pairs] == [("a", "b", "<upload>:2"), ("xxx", "y", "<upload>:3"),
                                                          ("c", "d", "<upload>:4")]


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_side_longer_than_a_sentence_is_named_not_scored(tmp_path, side):
    """A 14-million-character 'sentence' (a file whose line breaks were lost) took minutes and gigabytes
    to score; the line is now named with its length."""
    long = "palabra " * (files.MAX_SIDE_CHARS // 8 + 1)
    line = f"{long}\ty\n" if side == "source" else f"y\t{long}\n"
    data = f"a\tb\nc\td\n{line}e\tf\n"
    message = f"line 3: the {side} side is {len(long.strip()):,} characters long"
    with pytest.raises(DataError, match=message):
        parse_tsv(data.encode())
    with pytest.raises(DataError, match=message):
        validate_tsv(data.encode())
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(ln.split("\t")[0] + "\n" for ln in data.splitlines()))
    tgt.write_text("".join(ln.split("\t")[1] + "\n" for ln in data.splitlines()))
    with pytest.raises(DataError, match=f"{(src if side == 'source' else tgt).name}, {message}"):
        files.read_moses(str(src), str(tgt))
    assert len(parse_tsv(f"a\tb\n{'x' * files.MAX_SIDE_CHARS}\ty\n".encode())) == 2     # at the limit: kept


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.tsv"
    path.write_bytes(LINE * 100)
    with pytest.raises(DataError, match="more than the 1,000 allowed"):
        validate_tsv(str(path), max_bytes=1000)
    with pytest.raises(DataError, match="empty"):
        validate_tsv(b" \n\r\n\t\n")


def test_fewer_pairs_than_training_splits_are_refused_with_the_splits_reason():
    """Uploads of 1 or 2 pairs were accepted, and the trainer then failed: train/dev/test need one each."""
    pairs = [Pair(f"s{i}", f"t{i}", str(i)) for i in range(files.MIN_PAIRS)]
    assert [len(part) for part in split_held_out(pairs)] == [1, 1, 1]            # the same fact as the splitter's
    with pytest.raises(DataError, match="need at least 3 sentence pairs"):
        split_held_out(pairs[:-1])
    for n in range(1, files.MIN_PAIRS):
        data = b"".join(b"a%d\tb%d\n" % (i, i) for i in range(n))
        with pytest.raises(DataError, match=f"^<upload>: need at least 3 sentence pairs to make train/dev/test "
                                            f"splits, got {n}$"):
            validate_tsv(data, min_pairs=files.MIN_PAIRS)
        assert validate_tsv(data).pairs == n                      # only a check that training asks for
    assert validate_tsv(b"a\tb\nc\td\ne\tf\n", min_pairs=files.MIN_PAIRS).pairs == 3


@pytest.mark.parametrize("first, header", [("oui\tyes", ["oui", "yes"]), ("src\ttgt", ["src", "tgt"]),
                                           ("one\teins", [])])
def test_the_report_says_which_first_line_was_read_as_a_header(first, header):
    """`oui<TAB>yes` reads as two language codes and was dropped without a word: the report now says so."""
    report = validate_tsv(f"{first}\ntwo\tzwei\nthree\tdrei\nfour\tvier\n".encode())
    assert report.header == header
    assert report.pairs == (3 if header else 4) and report.sample[0].src == ("two" if header else "one")
