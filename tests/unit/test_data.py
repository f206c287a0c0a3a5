"""Corpora: the OSIS cleaner on real markup, the Bible build and split, numbers, user files, batching."""
from __future__ import annotations

import os
import random

import pytest
import torch

from explorer.data import DataError, Pair, ParallelCorpus, load_corpus, split_held_out
from explorer.data.batching import make_batches, pad_batch
from explorer.data.bible import SRC_MODULE, BibleNotInstalled, build_bible, chapter_of, split_by_chapter
from explorer.data.files import parse_tsv, read_moses, read_tsv, validate_tsv
from explorer.data.numbers import (MAX_NUMBER, english_words, german_words, join_german, sample_numbers,
                                   split_german)
from explorer.data.osis_clean import clean_verse, fix_drop_cap, is_enclitic_join

# ---------------------------------------------------------------- cleaner, on markup copied from the modules

EN_GEN_1_1 = ('<w lemma="strong:H0430">In</w> <w lemma="strong:H0853">the</w> <w lemma="strong:H7225">'
              'beginning</w>, <w lemma="strong:H0430">God</w><note placement="foot"><reference type='
              '"annotateRef">1:1 </reference>The Hebrew word rendered “God” is “אֱלֹהִ֑ים” (Elohim).</note>'
              '<w lemma="strong:H1254">created</w> <w lemma="strong:H0853">the</w> <w lemma="strong:H8064">'
              'heavens</w> <w lemma="strong:H0430">and</w> <w lemma="strong:H0853">the</w> <w lemma='
              '"strong:H0776">earth</w>. ')
ES_GEN_1_1 = ('<w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">crió</w> <w lemma='
              '"strong:H0430">Dios</w> <w lemma="strong:H8064">los cielos</w> <w lemma="strong:H0776">'
              'y la tierra</w>. ')
ES_JUDG_4_2 = ('<w lemma="strong:H8269">y el capitán</w> <w lemma="strong:H1931">de su</w> <w lemma='
               '"strong:H6635">ejército</w><transChange type="added">se llamaba</transChange><w lemma='
               '"strong:H5516">Sísara</w>, <w lemma="strong:H3427">y él habitaba</w> en Haroseth de las Gentes. ')
ES_GEN_19_12 = ('<w lemma="strong:H5892">en la ciudad</w>, <w lemma="strong:H3318">sáca</w><transChange '
                'type="added">lo</transChange> <w lemma="strong:H4480">de</w> <w lemma="strong:H4725">este lugar</w>')
EN_PS_3_1 = ('<div type="x-milestone" subType="x-preverse" sID="pv4877"/><title canonical="true" type='
             '"psalm">A Psalm by David, when he fled from Absalom his son.</title> <lg sID="gen7860"/> <l '
             'level="1" sID="gen7861"/><div type="x-milestone" subType="x-preverse" eID="pv4877"/>Yahweh, '
             'how <w lemma="strong:H1732">my</w> adversaries <w lemma="strong:H1121">have</w> increased!'
             '<l eID="gen7861" level="1"/> <l level="2" sID="gen7862"/>Many <w lemma="strong:H1121">are'
             '</w> rise <w lemma="strong:H1121">up</w> <w lemma="strong:H6440">against</w> <w lemma='
             '"strong:H6440">me</w>. <l eID="gen7862" level="2"/>')
ES_PS_3_1 = ('<w lemma="strong:H4210">Salmo</w> <w lemma="strong:H1732">de David</w>, <w lemma="strong:'
             'H1272">cuando huía</w> <w lemma="strong:H6440">de delante</w> <w lemma="strong:H0053">de '
             'Absalom</w> <w lemma="strong:H1121">su hijo</w>. ¡<w lemma="strong:H1121">OH</w> <w lemma='
             '"strong:H3068">Jehová</w>, <w lemma="strong:H4100">cuánto se</w> <w lemma="strong:H7231">'
             'han multiplicado</w> <w lemma="strong:H6862">mis enemigos</w>! ')
EN_SONG_1_2 = ('<div type="x-milestone" subType="x-preverse" sID="pv8242"/><speaker>Beloved</speaker> <lg '
               'sID="gen15617"/> <l level="1" sID="gen15618"/><div type="x-milestone" subType="x-preverse" '
               'eID="pv8242"/>Let <w lemma="strong:H3588">him</w> kiss <w lemma="strong:H3588">me</w>;<l '
               'eID="gen15618" level="1"/> ')
EN_REV_22_21 = ('<w lemma="strong:G3956">the</w> saints. Amen.  <chapter eID="Rev.22"/><div eID="gen35836" '
                'type="x-p"/> <div canonical="true" eID="gen35575" osisID="Rev" type="book"/> <div sID='
                '"gen35837" type="glossary"/> <milestone n="Glossary" type="x-usfm-h"/> <title level="1" '
                'type="main">World English Bible Glossary</title> <div sID="gen35838" type="introduction"/>'
                ' The following words used in the World English Bible (WEB) a')
ES_EPH_6_24 = ('<w lemma="strong:G0861">sinceridad</w>. <w lemma="strong:G0281">Amén</w>. <w lemma='
               '"strong:G1125">Escrita</w> <w lemma="strong:G4516">de Roma</w> <w lemma="strong:G4314">á'
               '</w> <w lemma="strong:G2180">los Efesios</w> <w lemma="strong:G1223">por</w> <w lemma='
               '"strong:G5190">Tichîco</w>.  <chapter eID="Eph.6"/><div eID="gen1153" type="x-p"/> ')


def test_note_removed_without_gluing_words():
    assert clean_verse(EN_GEN_1_1, "en") == "In the beginning, God created the heavens and the earth."


def test_trans_change_gets_spaces_but_enclitic_stays_joined():
    assert "ejército se llamaba Sísara," in clean_verse(ES_JUDG_4_2, "es")
    assert clean_verse(ES_GEN_19_12, "es") == "en la ciudad, sácalo de este lugar"
    assert is_enclitic_join("preguntándo", "le") and is_enclitic_join("decir", "les")
    assert not is_enclitic_join("ejército", "se llamaba") and not is_enclitic_join("Josué", "los")
    assert not is_enclitic_join("cuánto", "nos")


def test_psalm_title_kept_structure_removed():
    out = clean_verse(EN_PS_3_1, "en")
    assert out.startswith("A Psalm by David, when he fled from Absalom his son. Yahweh, how my")
    assert out.endswith("rise up against me.") and "<" not in out and "  " not in out


def test_speaker_removed():
    assert clean_verse(EN_SONG_1_2, "en") == "Let him kiss me;"


def test_glossary_cut():
    assert clean_verse(EN_REV_22_21, "en") == "the saints. Amen."


def test_drop_cap_title_cased_only_in_first_verse():
    assert clean_verse(ES_GEN_1_1, "es", first_of_chapter=True).startswith("En el principio crió")
    assert clean_verse(ES_GEN_1_1, "es").startswith("EN el principio")
    assert "¡Oh Jehová, cuánto se" in clean_verse(ES_PS_3_1, "es", first_of_chapter=True)
    common = {"habló", "yo"}.__contains__
    assert fix_drop_cap("Y HABLÓ Jehová á Moisés", common) == "Y habló Jehová á Moisés"
    assert fix_drop_cap("Y JEHOVÁ dijo", common) == "Y Jehová dijo"       # a name stays capitalised
    assert fix_drop_cap("Salmo de David. JEHOVÁ es mi pastor", common) == "Salmo de David. Jehová es mi pastor"


def test_colophon_cut_only_at_end_of_book():
    assert clean_verse(ES_EPH_6_24, "es", last_of_book=True) == "sinceridad. Amén."
    assert "Tichîco" in clean_verse(ES_EPH_6_24, "es")


# ---------------------------------------------------------------- Bible build (real modules)

needs_sword = pytest.mark.skipif(
    not os.path.exists(f"/usr/share/sword/mods.d/{SRC_MODULE}.conf"),
    reason="SWORD modules absent: apt-get install -y sword-text-sparv sword-text-web")


@pytest.fixture(scope="module")
def bible():
    return build_bible()


@needs_sword
def test_bible_build_counts_and_drops(bible):
    pairs, report = bible
    assert 30_400 <= len(pairs) <= 30_800, len(pairs)
    assert len(report["dropped_chapters"]) == 18
    for ch in ("Num.13", "Num.30", "1Sam.24", "Hos.12", "Jonah.2", "Job.39", "Job.40"):
        assert ch in report["dropped_chapters"]
    by_ref = {p.ref: p for p in pairs}
    assert "1John.5.7" not in by_ref and "Luke.17.36" not in by_ref
    assert by_ref["Gen.1.1"].src == "En el principio crió Dios los cielos y la tierra."
    assert by_ref["Ps.23.1"].tgt == "A Psalm by David. Yahweh is my shepherd; I shall lack nothing."
    assert by_ref["Gen.2.1"].src.startswith("Y fueron acabados los cielos")
    assert by_ref["Eph.6.24"].src.endswith("en sinceridad. Amén.")
    assert all(p.src and p.tgt and "<" not in p.src + p.tgt for p in pairs)


@needs_sword
def test_bible_split_holds_out_whole_chapters(bible):
    pairs, _ = bible
    train, dev, test = split_by_chapter(pairs, seed=7)
    assert len(train) + len(dev) + len(test) == len(pairs)
    assert 1000 <= len(dev) < 1200 and 1000 <= len(test) < 1200
    chapters = [{chapter_of(p.ref) for p in part} for part in (train, dev, test)]
    assert not (chapters[0] & chapters[1]) and not (chapters[0] & chapters[2])
    assert not (chapters[1] & chapters[2])
    refs = [{p.ref for p in part} for part in (train, dev, test)]
    assert not (refs[0] & refs[1]) and not (refs[0] & refs[2])
    assert split_by_chapter(pairs, seed=7)[1] == dev          # deterministic
    assert split_by_chapter(pairs, seed=8)[1] != dev


def test_missing_modules_raise_install_hint(tmp_path):
    with pytest.raises(BibleNotInstalled, match="apt-get install -y sword-text-sparv sword-text-web"):
        build_bible(str(tmp_path))


# ---------------------------------------------------------------- numbers

def _sample_numbers() -> list[int]:
    """Every number below 1,200, each power of ten and its neighbours, and 1,500 drawn: the words are
    num2words' own, through a converter copy that knows only the number words up to MAX_NUMBER."""
    rng = random.Random(0)
    edges = [p + d for p in (10 ** k for k in range(3, 6)) for d in (-1, 0, 1)] + [MAX_NUMBER]
    return list(range(0, 1200)) + edges + [rng.randint(0, MAX_NUMBER) for _ in range(1500)]


def test_german_morphemes_rejoin_to_num2words():
    from num2words import num2words
    for n in _sample_numbers():
        split = german_words(n)
        assert join_german(split) == num2words(n, lang="de"), n
    assert german_words(21) == "ein und zwanzig" and german_words(16) == "sechzehn"
    assert german_words(66) == "sechs und sechzig" and german_words(101) == "ein hundert eins"
    with pytest.raises(ValueError):
        split_german("einundzwanzigx")


def test_english_tokens():
    from num2words import num2words
    for n in _sample_numbers():
        assert english_words(n) == " ".join(num2words(n, lang="en").replace("-", " ").replace(",", " ").split()), n
    assert english_words(21) == "twenty one"
    assert english_words(1234) == "one thousand two hundred and thirty four"


def test_number_splits_disjoint_and_deterministic():
    train, dev, test = sample_numbers(seed=3, train_size=3000, dev_size=200, test_size=200)
    assert len(train) == 3000 and len(dev) == 200 and len(test) == 200
    assert not set(train) & set(dev) and not set(train) & set(test) and not set(dev) & set(test)
    assert set(range(100)) <= set(train)
    assert sample_numbers(seed=3, train_size=3000, dev_size=200, test_size=200) == (train, dev, test)


# ---------------------------------------------------------------- user files

def test_tsv_reads_and_caches(tmp_path):
    f = tmp_path / "my.tsv"
    f.write_text("".join(f"hola {i}\thello {i}\n" for i in range(40)), encoding="utf-8")
    pairs = read_tsv(str(f))
    assert len(pairs) == 40 and pairs[0] == Pair("hola 0", "hello 0", "my.tsv:1")
    corpus = load_corpus(str(f), data_dir=str(tmp_path / "data"))
    again = load_corpus(str(f), data_dir=str(tmp_path / "data"))
    assert corpus.sizes() == again.sizes() and sum(corpus.sizes().values()) == 40
    assert corpus.dev == again.dev and len(corpus.dev) >= 1
    assert not {p.ref for p in corpus.train} & {p.ref for p in corpus.dev + corpus.test}


@pytest.mark.parametrize("header, languages", [("es\ten\n", ("es", "en")), ("src\ttgt\n", ("src", "tgt")),
                                               ("", ("src", "tgt"))])
def test_a_header_of_two_language_codes_names_the_corpus_languages(tmp_path, header, languages):
    """The header `es<TAB>en` was read and dropped: every model of a user's file was labelled src -> tgt,
    and `train --src-lang` was taken and never used."""
    f = tmp_path / "my.tsv"
    f.write_text(header + "".join(f"hola {i}\thello {i}\n" for i in range(20)), encoding="utf-8")
    corpus = load_corpus(str(f), data_dir=str(tmp_path / "data"))
    assert (corpus.src_lang, corpus.tgt_lang) == languages and sum(corpus.sizes().values()) == 20
    again = load_corpus(str(f), data_dir=str(tmp_path / "data"))        # from the cache
    assert (again.src_lang, again.tgt_lang) == languages


def test_retired_train_config_keys_are_read_and_left_and_the_flags_are_gone(capsys):
    from explorer.config import TrainConfig
    from explorer.training.args import build_parser

    old = {**TrainConfig().to_dict(), "src_lang": "en", "tgt_lang": "de"}     # a run's train_config.json of before
    assert TrainConfig.from_dict(old) == TrainConfig()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--dataset", "numbers", "--src-lang", "es"])
    assert "unrecognized arguments: --src-lang es" in capsys.readouterr().err


def test_each_seeds_split_has_its_own_cache_folder_so_two_loads_never_mix_them(tmp_path):
    """One folder held every seed's split, written file by file: `data --seed 7` beside a trainer's load
    mixed one seed's train.tsv with the other's test.tsv, putting test pairs in training."""
    f = tmp_path / "my.tsv"
    f.write_text("".join(f"hola {i}\thello {i}\n" for i in range(60)), encoding="utf-8")
    data = tmp_path / "data"
    default = load_corpus(str(f), data_dir=str(data))
    [folder] = list(data.iterdir())
    written = {p.name: p.stat().st_ino for p in folder.iterdir()}
    other = load_corpus(str(f), data_dir=str(data), seed=7)
    assert other.test != default.test                       # another split...
    assert {p.name: p.stat().st_ino for p in folder.iterdir()} == written     # ...never written over the first
    assert sorted(p.name for p in data.iterdir()) == [folder.name, folder.name + "-seed7"]
    assert load_corpus(str(f), data_dir=str(data), seed=7) == other
    assert load_corpus(str(f), data_dir=str(data)) == default
    for corpus in (default, other):
        assert not {p.ref for p in corpus.train} & {p.ref for p in corpus.dev + corpus.test}


@pytest.mark.parametrize("content, message", [
    (b"a\tb\nc\td\te\n", r"line 2: expected 2 tab-separated columns, found 3"),
    (b"a\tb\nno tab here\n", r"line 2: expected 2"),
    (b"a\tb\nc\td\n\xff\xfe\tx\n", r"line 3: not valid UTF-8"),
    (b"", r"empty"),
    (b"a\tb\n\tb\n", r"line 2: the source side is empty"),
])
def test_tsv_bad_data_errors_name_the_line(tmp_path, content, message):
    f = tmp_path / "bad.tsv"
    f.write_bytes(content)
    with pytest.raises(DataError, match=message) as err:
        read_tsv(str(f))
    assert "bad.tsv" in str(err.value)
    with pytest.raises(DataError, match=message):
        validate_tsv(content)


def test_validate_tsv_report_and_size_limit():
    report = validate_tsv(b"src\ttgt\nhola\thello\nadios\tbye\n")
    assert report.pairs == 2 and report.sample[0].src == "hola"
    with pytest.raises(DataError, match="limit"):
        validate_tsv(b"a\tb\n" * 100, max_bytes=10)


@pytest.mark.parametrize("header", ["es\ten", "en\tde", "spa\teng", "SRC\ttgt", "source\ttarget"])
def test_a_header_of_two_language_codes_is_a_header_not_a_pair(header):
    """Many corpora start `es<TAB>en`: read as the header it is, not as a sentence pair "es" -> "en"."""
    pairs = parse_tsv(f"{header}\nhola\thello\nadiós\tbye\n".encode(), "codes.tsv")
    assert [(p.src, p.tgt) for p in pairs] == [("hola", "hello"), ("adiós", "bye")]
    assert pairs[0].ref == "codes.tsv:2"                                   # line numbers still count the header


@pytest.mark.parametrize("first", ["es\tes", "Es\tEn", "hola\thello", "sí\tyes", "es\ten\tde", "e\tn"])
def test_a_first_line_that_is_not_two_different_codes_is_a_pair(first):
    """Only two different lowercase codes of 2-3 letters make a header: a short real pair stays a pair."""
    if first.count("\t") == 2:
        with pytest.raises(DataError, match="line 1: expected 2"):
            parse_tsv(f"{first}\nhola\thello\n".encode())
        return
    pairs = parse_tsv(f"{first}\nhola\thello\n".encode())
    assert len(pairs) == 2 and (pairs[0].src, pairs[0].tgt) == tuple(first.split("\t"))


def test_moses_pairs_and_mismatch(tmp_path):
    src, tgt = tmp_path / "a.es", tmp_path / "a.en"
    src.write_text("hola\nadios\n", encoding="utf-8")
    tgt.write_text("hello\nbye\n", encoding="utf-8")
    assert [p[:2] for p in read_moses(str(src), str(tgt))] == [("hola", "hello"), ("adios", "bye")]
    tgt.write_text("hello\nbye\nextra\n", encoding="utf-8")
    with pytest.raises(DataError, match="has 2 lines but .* has 3"):
        read_moses(str(src), str(tgt))
    tgt.write_text("hello\n\nend\n", encoding="utf-8")
    src.write_text("hola\nadios\nfin\n", encoding="utf-8")
    with pytest.raises(DataError, match="a.en, line 2"):
        read_moses(str(src), str(tgt))


def test_hf_without_datasets_is_a_clear_error(monkeypatch):
    """The dev extras install `datasets` (sae-lens and dattri need it), so the test hides it: it was skipped
    on every machine `make setup` made."""
    import sys
    monkeypatch.setitem(sys.modules, "datasets", None)          # `import datasets` raises ImportError
    with pytest.raises(DataError, match="pip install datasets"):
        load_corpus("hf:Helsinki-NLP/opus_books:en-es", use_cache=False)


def test_user_split_small_file():
    pairs = [Pair(f"s{i}", f"t{i}", str(i)) for i in range(5)]
    train, dev, test = split_held_out(pairs)
    assert len(dev) == 1 and len(test) == 1 and len(train) == 3
    with pytest.raises(DataError):
        split_held_out(pairs[:2])


def test_unknown_spec():
    with pytest.raises(DataError, match="unknown corpus"):
        load_corpus("no-such-thing.tsv", use_cache=False)


def test_a_spec_with_an_empty_file_name_or_a_symlink_loop_is_said_as_such(tmp_path):
    """"a.tsv," said ": cannot be read" (an empty name); a symlink loop said "unknown corpus"."""
    for spec in ("a.tsv,", ",", " ,b.txt"):
        with pytest.raises(DataError, match="names two files, and one of these names is empty"):
            load_corpus(spec, use_cache=False)
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    with pytest.raises(DataError, match="symbolic links"):
        load_corpus(str(tmp_path / "one"), use_cache=False)


# ---------------------------------------------------------------- batching

def test_batches_respect_max_tokens_and_cover_everything():
    rng = random.Random(1)
    lengths = [(rng.randint(1, 60), rng.randint(1, 60)) for _ in range(3000)] + [(500, 3)]
    batches = make_batches(lengths, max_tokens=400, seed=5)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        if len(b) > 1:
            assert max(lengths[i][0] for i in b) * len(b) <= 400
            assert max(lengths[i][1] for i in b) * len(b) <= 400
    assert [3000] in batches                                     # the over-long one alone
    assert make_batches(lengths, 400, seed=5) == batches
    assert make_batches(lengths, 400, seed=6) != batches
    ordered = make_batches(lengths, 400, seed=5, shuffle=False)
    assert sorted(i for b in ordered for i in b) == flat


def test_pad_batch():
    out = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert out.dtype == torch.long and out.tolist() == [[5, 6, 7], [8, 0, 0]]


def test_parallel_corpus_sizes():
    c = ParallelCorpus("x", "a", "b", [Pair("s", "t")], [], [])
    assert c.sizes() == {"train": 1, "dev": 0, "test": 0}


def test_held_out_pairs_that_training_repeats_are_counted_and_said(tmp_path, capsys):
    """A file that repeats its lines put the same pairs in train and test: the test scores measured memory,
    and nothing said so."""
    corpus = ParallelCorpus("c", "es", "en", train=[Pair("a", "x"), Pair("b", "y"), Pair("c", "z")],
                            dev=[Pair("a", "x"), Pair("d", "w")], test=[Pair("a", "other"), Pair("e", "v")])
    assert corpus.seen_in_training() == {"dev": 1, "test": 0}      # the same source with another target is new
    assert corpus.overlap_warning().startswith("warning: 1 of the 2 dev pairs (50.0%) are also training pairs")
    corpus.test.append(Pair("c", "z"))
    assert "1 of the 2 dev pairs (50.0%) and 1 of the 3 test pairs (33.3%)" in corpus.overlap_warning()
    few = ParallelCorpus("c", "es", "en", train=[Pair("a", "x")], dev=[Pair("a", "x")] + [Pair("b", "y")] * 20)
    assert few.overlap_warning().startswith("note: 1 of the 21 dev pairs (4.8%)")     # a Bible's repeated verses
    assert ParallelCorpus("c", "es", "en", train=[Pair("a", "x")], dev=[Pair("b", "y")],
                          test=[Pair("c", "z")]).overlap_warning() is None

    from explorer.data.__main__ import main as data_main

    repeated = tmp_path / "repeated.tsv"
    repeated.write_text("hola\thello\nadios\tbye\nsi\tyes\n" * 20)
    assert data_main([str(repeated), "--data-dir", str(tmp_path / "data")]) == 0
    assert ("warning: 3 of the 3 dev pairs (100.0%) and 3 of the 3 test pairs (100.0%) are also training pairs"
            in capsys.readouterr().err)


def test_a_corpus_path_that_is_not_a_regular_file_is_refused_without_reading_or_waiting(tmp_path):
    """/dev/zero says 0 bytes and never ends; a FIFO's open waits for a writer forever."""
    import os

    from explorer.data.files import read_moses, read_tsv
    from explorer.data.types import DataError
    fifo = tmp_path / "pipe.tsv"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        with pytest.raises(DataError, match="not a regular file|directory|FIFO|device"):
            read_tsv(path)
    with pytest.raises(DataError, match="FIFO"):
        read_moses(str(fifo), "/dev/zero")


@pytest.mark.parametrize("flag", [["--limit", "-3"], ["--beam", "0"], ["--beam", "100000"]])
def test_evaluate_refuses_counts_out_of_range_before_loading(flag, capsys):
    from explorer.evaluation.command import main
    with pytest.raises(SystemExit) as stop:
        main(["checkpoints/does-not-exist", *flag])
    assert stop.value.code == 2 and flag[0] in capsys.readouterr().err
