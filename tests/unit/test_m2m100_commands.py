"""The analysis commands on a multilingual model: --src-lang / --tgt-lang bind the pair (the target tag
forced in what they analyse), as `evaluate` does; a missing or unknown language, or a pair asked of a
one-pair model, is refused in one line with exit status 2 before anything is computed.

On a small random M2M100 imported with es -> en, and one imported without a pair.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from explorer.decoding.translate import translate
from explorer.files.names import MULTILINGUAL_LANGUAGES, TEST_SPLIT
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.sentences import GREEDY
from support.app_support import ROOT
from support.m2m100_helpers import TEST_SOURCES, imported_es_en

pytest.importorskip("transformers")
NUMBERS = ROOT / "checkpoints" / "numbers-en-de"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(a checkpoint imported with es -> en, one imported without a pair), each with a test split."""
    root = tmp_path_factory.mktemp("m2m100-commands")
    paired = imported_es_en(root)
    unpaired = Path(shutil.copytree(paired, root / "unpaired"))       # the same model, its pair left open
    languages = json.loads((unpaired / MULTILINGUAL_LANGUAGES).read_text(encoding="utf-8"))
    (unpaired / MULTILINGUAL_LANGUAGES).write_text(json.dumps({**languages, "default": [None, None]}), encoding="utf-8")
    for folder in (paired, unpaired):
        (folder / TEST_SPLIT).write_text("".join(f"{s}\tla maison\n" for s in TEST_SOURCES[:2]), encoding="utf-8")
    return paired, unpaired


def texts(folder, src: str, tgt: str) -> list[str]:
    ck = load_checkpoint(folder)
    tok = ck.tokenizer.with_languages(src, tgt)
    return [translate(ck.model, tok, s, GREEDY).text for s in TEST_SOURCES[:2]]


def one_line(capsys, *fragments: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert all(f in err for f in fragments), err


def test_lens_translates_into_the_chosen_target_language(folders, tmp_path, capsys):
    from explorer.studies.lens.__main__ import main as lens

    paired, _ = folders
    out = tmp_path / "lens.json"
    common = [str(paired), "--sentences", "2", "--out", str(out)]
    assert lens(common + ["--src-lang", "es", "--tgt-lang", "fr"]) == 0
    assert json.loads(out.read_text())["decoder_lens"][-1]["translations"] == texts(paired, "es", "fr")
    assert lens(common) == 0                                  # no flags: the pair it was imported with
    assert json.loads(out.read_text())["decoder_lens"][-1]["translations"] == texts(paired, "es", "en")


def test_patch_translates_the_pair_into_the_chosen_target_language(folders, tmp_path):
    from explorer.studies.patching.__main__ import main as patch
    from explorer.studies.patching.swap import suggest_swaps

    paired, _ = folders
    ck = load_checkpoint(paired)
    tok = ck.tokenizer.with_languages("es", "fr")
    clean = "la de el en"
    corrupt = suggest_swaps(ck.model, tok, clean, 1)[0].corrupt
    out = tmp_path / "patch.json"
    assert patch([str(paired), "--clean", clean, "--corrupt", corrupt, "--src-lang", "es", "--tgt-lang", "fr",
                  "--out", str(out)]) == 0
    described = json.loads(out.read_text())["pairs"][0]
    assert described["clean_translation"] == translate(ck.model, tok, clean, GREEDY).text
    assert described["prefix_pieces"][0] == "__fr__"


def test_a_missing_or_unknown_language_is_refused_in_one_line(folders, tmp_path, capsys):
    from explorer.studies.contrastive.__main__ import main as search
    from explorer.studies.features.__main__ import main as features
    from explorer.studies.heads.__main__ import main as heads
    from explorer.studies.patching.__main__ import main as patch

    paired, unpaired = folders
    out = ["--out", str(tmp_path / "x.json")]
    capsys.readouterr()
    assert heads([str(unpaired), "--sentences", "2"] + out) == 2
    one_line(capsys, "choose the source language (--src-lang)", "e.g. en")
    assert search([str(unpaired), "--src-lang", "es", "--sentences", "2"] + out) == 2
    one_line(capsys, "choose the target language (--tgt-lang)")
    assert patch([str(paired), "--clean", "la", "--corrupt", "el", "--tgt-lang", "zz"] + out) == 2
    one_line(capsys, "unknown language 'zz'")
    for action in ("train", "evaluate"):                    # the dictionaries' command binds the pair too
        assert features([action, str(paired), "--src-lang", "zz"] + out) == 2
        one_line(capsys, "unknown language 'zz'")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")
def test_a_pair_asked_of_a_one_pair_model_is_refused_in_one_line(tmp_path, capsys):
    from explorer.studies.lens.__main__ import main as lens

    capsys.readouterr()
    assert lens([str(NUMBERS), "--src-lang", "en", "--out", str(tmp_path / "x.json")]) == 2
    one_line(capsys, "this one translates one pair")
