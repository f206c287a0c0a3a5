"""`python -m explorer lens` and `python -m explorer patch`:
what they write, and what they refuse in one line before loading anything."""
from __future__ import annotations

import json

import pytest

from explorer.__main__ import COMMANDS
from explorer.decoding.translate import decode
from explorer.files.places import REPO_ROOT
from explorer.studies.common.sentences import GREEDY
from explorer.studies.lens.__main__ import main as lens_main
from explorer.studies.patching.__main__ import main as patch_main
from explorer.store import checkpoint as checkpoint_store
from explorer.store.checkpoint import load_checkpoint
from explorer.text.encoding import source_ids
from support.numerics import logit_difference_atol

NUMBERS = str(REPO_ROOT / "checkpoints" / "numbers-en-de")


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), captured.err
    return lines[-1]


def test_both_commands_are_behind_the_door():
    assert COMMANDS["lens"][0] == "explorer.studies.lens.__main__" and COMMANDS["patch"][0] == "explorer.studies.patching.__main__"


def test_lens_writes_a_row_per_encoder_depth_and_per_decoder_layer(tmp_path, capsys):
    out = tmp_path / "lens.json"
    assert lens_main([NUMBERS, "--sentences", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [row["label"] for row in result["decoder_lens"]] == ["embeddings", "layer 1", "layer 2"]
    assert all({"bleu", "chrf", "translations"} <= set(row) and len(row["translations"]) == 4
               for row in result["decoder_lens"])
    ckpt = load_checkpoint(NUMBERS)
    pairs = [line.split("\t") for line in (REPO_ROOT / "checkpoints" / "numbers-en-de" / "test.tsv").read_text().splitlines()[1:5]]
    src = [source_ids(ckpt.tokenizer, p[1], ckpt.config.max_len, ckpt.config.special) for p in pairs]
    plain = [ckpt.tokenizer.decode(d.best.output_ids, side="tgt") for d in decode(ckpt.model, src, GREEDY)]
    assert result["decoder_lens"][-1]["translations"] == plain                  # the last depth is the model
    assert [row["layer"] for row in result["logit_lens"]] == [1, 2]
    assert result["logit_lens"][-1]["top1_agreement"] == 1.0
    assert "DecoderLens over 4 sentences" in capsys.readouterr().out


def test_patch_writes_the_grids_and_what_they_are_normalised_by(tmp_path):
    out = tmp_path / "patch.json"
    assert patch_main([NUMBERS, "--clean", "twenty one thousand", "--corrupt", "twenty two thousand",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["grids"]) == {"encoder_resid", "decoder_resid", "encoder_heads", "decoder_heads",
                                    "cross_heads", "changed"}
    (pair,) = result["pairs"]
    ld = pair["logit_difference"]
    assert ld["normalised_by"] == pytest.approx(ld["clean"] - ld["corrupt"]) and ld["normalised_by"] > 0
    assert (pair["clean_token"], pair["corrupt_token"]) == ("\u2581ein", "\u2581zwei")
    # the whole changed word patched restores all of it, up to four logit differences' rounding over the gap
    bound = 4 * logit_difference_atol(load_checkpoint(NUMBERS).model, ld["clean"], ld["corrupt"]) / ld["normalised_by"]
    assert result["grids"]["changed"]["denoise"]["mean"][0][0] == pytest.approx(1.0, abs=bound)
    assert result["grids"]["encoder_resid"]["rows"][0] == "embeddings"


def test_patch_averages_a_pairs_file_and_lists_the_pairs_it_skips(tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("twenty one\ttwenty two\nfive hundred\tsix hundred\nthree\tthree thousand\n")
    out = tmp_path / "patch.json"
    assert patch_main([NUMBERS, "--pairs", str(pairs), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["pairs"] == 2 and len(result["pairs"]) == 2
    assert [s["pair"] for s in result["skipped"]] == [3] and "same number of pieces" in result["skipped"][0]["reason"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\tone\n")
    assert patch_main([NUMBERS, "--pairs", str(bad), "--out", str(tmp_path / "x.json")]) == 2
    assert "the two sources are the same pieces" in one_line_error(capsys)
    assert not (tmp_path / "x.json").exists()


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the checkpoint was loaded before the arguments were checked")
    monkeypatch.setattr(checkpoint_store, "load_checkpoint", refuse)


@pytest.mark.parametrize("main, argv, message", [
    (lens_main, ["--sentences", "0"], "sentences >= 1 and <= 1002 required"),
    (lens_main, ["--sentences", "1e9"], "is not a whole number"),
    (lens_main, ["--beam", "11"], "beam >= 1 and <= 10 required"),
    (lens_main, ["--forced", "nonsense"], "invalid choice"),
    (lens_main, ["--device", "cuda:99"], "cuda"),
    (patch_main, ["--clean", "one"], "give --clean and --corrupt"),
    (patch_main, ["--clean", "one", "--corrupt", "two", "--pairs", "x.tsv"], "not both"),
    (patch_main, ["--pairs", "/nonexistent/pairs.tsv"], "pairs.tsv"),
])
def test_bad_arguments_are_refused_in_one_line_before_loading(main, argv, message, tmp_path, capsys, no_loading):
    assert main([NUMBERS, *argv, "--out", str(tmp_path / "x.json")]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("main", [lens_main, patch_main])
def test_an_out_that_cannot_be_written_is_refused(main, tmp_path, capsys, no_loading):
    assert main([NUMBERS, "--clean", "one", "--corrupt", "two"][:1 if main is lens_main else 5]
                + ["--out", str(tmp_path)]) == 2
    assert "directory" in one_line_error(capsys)


def test_a_pair_that_cannot_be_patched_is_one_line(tmp_path, capsys):
    assert patch_main([NUMBERS, "--clean", "twenty one", "--corrupt", "twenty", "--out", str(tmp_path / "x.json")]) == 2
    assert "same number of pieces" in one_line_error(capsys)
