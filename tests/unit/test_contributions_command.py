"""`python -m explorer contributions`: ALTI+ over a test set
written as JSON whole or not at all, the made-up-translation check and the alignment check; a bad
argument or file is refused in one line before the checkpoint is loaded."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from explorer.__main__ import main as door
from explorer.studies.contributions.__main__ import main
from explorer.studies.contributions.detached import auroc, derangement
from explorer.studies.common.context import RunContext
from explorer.studies.contributions.job import CONTRIBUTIONS, ContributionSettings
from explorer.files.places import REPO_ROOT
from explorer.runtime.progress import Cancelled
from explorer.store import checkpoint as checkpoint_store
from explorer.store.checkpoint import load_checkpoint
from support.numerics import model_atol

NUMBERS = str(REPO_ROOT / "checkpoints" / "numbers-en-de")


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the checkpoint was loaded before the arguments were checked")
    monkeypatch.setattr(checkpoint_store, "load_checkpoint", refuse)


def test_the_door_lists_and_opens_it(capsys):
    assert door([]) == 0
    assert "contributions" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        door(["contributions", "--help"])
    assert stop.value.code == 0 and "--detached-check" in capsys.readouterr().out


def test_a_run_writes_every_sentence_and_its_shares(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main([NUMBERS, "--sentences", "3", "--per-layer", "--out", str(out)]) == 0
    assert "source share over 3 sentences" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["settings"]["sentences"] == 3 and result["settings"]["forced"] == "reference"
    for entry in result["sentences"]:
        s, t = len(entry["src_tokens"]), len(entry["tgt_tokens"])
        m = np.array(entry["contributions"])                                     # [T, S + T]
        assert m.shape == (t, s + t) and len(entry["source_share"]) == t == len(entry["decoder_inputs"])
        assert np.allclose(m.sum(axis=1), 1, atol=1e-4) and (m >= 0).all()
        assert np.allclose(m[:, :s].sum(axis=1), entry["source_share"], atol=1e-4)
        assert np.array(entry["layers"]["cross"]).shape[1:] == (t, s + 1)
        assert entry["tgt_tokens"][-1] == "</s>" and entry["decoder_inputs"][0] == "<start>"
    assert 0 < result["summary"]["mean_source_share"] < 1


def test_the_models_own_output_and_a_tsv_of_pairs(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("twenty-one\teinundzwanzig\nfive\tfünf\n")
    out = tmp_path / "c.json"
    assert main([NUMBERS, "--pairs", str(tsv), "--forced", "output", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [e["source"] for e in result["sentences"]] == ["twenty-one", "five"]
    assert result["settings"]["forced"] == "output" and "layers" not in result["sentences"][0]


def test_the_detached_check_and_the_alignment_check(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main([NUMBERS, "--detached-check", "--sentences", "6", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {p["partner"] for p in result["pairs"]} == set(range(6))
    assert all(p["partner"] != p["index"] for p in result["pairs"])
    for score in result["scores"].values():
        assert 0 <= score["auroc"] <= 1
    assert "AUROC" in capsys.readouterr().out
    out = tmp_path / "a.json"
    assert main([NUMBERS, "--alignment", "--gold-pairs", "3", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    layers = {r["layer"] for r in rows}
    assert layers == {1, 2, "rollout"} and all(0 <= r["aer"] <= 1 for r in rows)
    assert "AER" in capsys.readouterr().out


@pytest.mark.parametrize("args, words", [
    (["--sentences", "0"], "sentences >= 1"),
    (["--sentences", "5000"], "<= 1002"),
    (["--forced", "beam"], "invalid choice"),
    (["--detached-check", "--alignment"], "not allowed with"),
    (["--faithfulness", "--forced", "output"], "drop --forced"),
    (["--gold", "x.align"], "only with --alignment"),
    (["--device", "cuda:7"], "cuda"),
])
def test_bad_arguments_are_refused_in_one_line(args, words, tmp_path, capsys, no_loading):
    assert main([NUMBERS, *args, "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err


def test_bad_files_are_refused_before_loading(tmp_path, capsys, no_loading):
    (tmp_path / "dir").mkdir()
    assert main([NUMBERS, "--out", str(tmp_path / "dir")]) == 2
    assert "directory" in capsys.readouterr().err
    assert main([NUMBERS, "--pairs", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr().err.startswith("error: --pairs")
    (tmp_path / "bad.tsv").write_text("only one column\n")
    assert main([NUMBERS, "--pairs", str(tmp_path / "bad.tsv"), "--out", str(tmp_path / "c.json")]) == 2
    assert "tab-separated" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_a_cancelled_run_writes_nothing(tmp_path):
    ck = load_checkpoint(NUMBERS)
    from explorer.evaluation.scores import held_out_pairs
    pairs, _ = held_out_pairs(ck.path, ck.meta)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        CONTRIBUTIONS.to_file(tmp_path / "c.json", ck.model, ck.tokenizer, pairs, ContributionSettings(sentences=2),
                              context=RunContext(cancel=stop))
    assert not (tmp_path / "c.json").exists()
    with pytest.raises(ValueError, match="sentences"):
        ContributionSettings(sentences=0)


def test_auroc_and_the_derangement():
    assert auroc([3, 4], [1, 2]) == 1.0 and auroc([1, 2], [3, 4]) == 0.0
    assert auroc([1, 2], [1, 2]) == 0.5 and auroc([2], [1, 2, 3]) == 0.5
    for n in (2, 3, 10):
        partner = derangement(n)
        assert sorted(partner) == list(range(n)) and all(p != i for i, p in enumerate(partner))
    assert derangement(10) == derangement(10)
    with pytest.raises(ValueError):
        derangement(1)


def test_the_faithfulness_scorecard_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "f.json"
    assert main([NUMBERS, "--faithfulness", "--sentences", "2", "--methods", "alti", "attention-mean",
                 "--seeds", "2", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {(r["method"], r["measure"]) for r in rows} == {
        (m, k) for m in ("alti", "attention-mean", "random") for k in ("comprehensiveness", "sufficiency")}
    assert all(r["ci95"][0] <= r["mean"] <= r["ci95"][1] for r in rows)
    assert "comprehensiveness" in capsys.readouterr().out


def test_scorecards_of_parts_combine_into_the_scorecard_of_the_whole(tmp_path, capsys):
    lines = ["twenty-one\teinundzwanzig", "five hundred\tfünfhundert", "seven\tsieben"]
    files = []
    for name, part in (("all", lines), ("a", lines[:2]), ("b", lines[2:])):
        (tmp_path / f"{name}.tsv").write_text("\n".join(part) + "\n")
        out = tmp_path / f"{name}.json"
        assert main([NUMBERS, "--faithfulness", "--pairs", str(tmp_path / f"{name}.tsv"), "--methods", "alti",
                     "attention-mean", "--seeds", "2", "--out", str(out)]) == 0
        files.append(out)
    combined = tmp_path / "combined.json"
    assert main([NUMBERS, "--faithfulness", "--combine", str(files[1]), str(files[2]), "--out", str(combined)]) == 0
    whole, parts = json.loads(files[0].read_text()), json.loads(combined.read_text())
    assert parts["settings"]["sentences"] == 3 and parts["settings"]["parts"] == 2
    # each measure is a difference of two log-probs, which the parts may batch otherwise: within twice
    # model_atol, and so are their means and intervals
    atol = 2 * model_atol(load_checkpoint(NUMBERS).model, [-1.0])
    for a, b in zip(whole["rows"], parts["rows"]):
        assert (a["method"], a["measure"]) == (b["method"], b["measure"])
        assert abs(a["mean"] - b["mean"]) < atol and np.allclose(a["ci95"], b["ci95"], atol=atol, rtol=0)
    capsys.readouterr()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**parts, "settings": {**parts["settings"], "seeds": 3}}))
    assert main([NUMBERS, "--faithfulness", "--combine", str(files[1]), str(other), "--out", str(combined)]) == 2
    assert "differ in seeds" in capsys.readouterr().err
    assert main([NUMBERS, "--combine", str(files[1])]) == 2
    assert main([NUMBERS, "--faithfulness", "--combine", str(tmp_path / "a.tsv")]) == 2
    assert "not a faithfulness scorecard" in capsys.readouterr().err
