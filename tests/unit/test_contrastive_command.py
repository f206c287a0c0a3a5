"""`python -m explorer search` (explorer.studies.contrastive): the JSON it writes on the shipped numbers model,
its refusals in one line before anything is loaded or written, and a cancelled job that writes nothing."""
from __future__ import annotations

import json
import threading

import pytest
import torch

from explorer.__main__ import main as door
from explorer.studies.contrastive.__main__ import main
from explorer.studies.common.context import RunContext
from explorer.studies.contrastive.job import BEAM_CURVE, SearchSettings
from explorer.files.places import REPO_ROOT
from explorer.runtime.progress import Cancelled

torch.set_num_threads(1)
NUMBERS = str(REPO_ROOT / "checkpoints" / "numbers-en-de")


def test_the_command_writes_the_curve_and_the_exact_search(tmp_path, capsys):
    out = tmp_path / "search.json"
    assert door(["search", NUMBERS, "--beams", "1,2", "--sentences", "4", "--exact", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = result["beam_curve"]
    assert [(r["length_penalty"], r["beam"]) for r in rows] == [("none", 1), ("none", 2), ("gnmt:0.6", 1),
                                                                  ("gnmt:0.6", 2)]
    for r in rows:
        assert {"beam", "bleu", "chrf", "length_ratio", "mean_score", "search_errors"} <= set(r)
        assert len(r["translations"]) == 4
    assert all(r["search_errors"] is not None for r in rows if r["length_penalty"] == "none")
    assert len(result["exact"]) == 4
    for e in result["exact"]:
        assert e["proven"] is True and set(e["beam_scores"]) == {"1", "2"}
        assert all(e["score"] >= s - 1e-4 for s in e["beam_scores"].values())
    assert "exact search: proven on 4 of 4" in capsys.readouterr().out
    assert BEAM_CURVE.read(out) == result and BEAM_CURVE.read(tmp_path / "missing.json") is None


@pytest.mark.parametrize("argv,message", [
    (["--beams", "0"], "beam >= 1"), (["--beams", "1,1"], "distinct"), (["--beams", "a,2"], "not a whole number"),
    (["--beams", "1,65"], "beam >= 1 and <= 64"), (["--sentences", "0"], "sentences >= 1"),
    (["--length-penalties", "loud"], "length penalty"), (["--length-penalties", "gnmt:9"], "alpha"),
    (["--exact-nodes", "0"], "exact-nodes >= 1"), (["--exact-seconds", "99999"], "exact-seconds"),
    (["--device", "tpu"], "device")])
def test_bad_arguments_are_refused_in_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "search.json"
    assert main([NUMBERS, *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_beam_the_vocabulary_cannot_hold_and_an_unwritable_out_are_refused(tmp_path, capsys):
    out = tmp_path / "search.json"
    assert main([NUMBERS, "--beams", "1,40", "--sentences", "2", "--out", str(out)]) == 2
    assert "beam_size must be in" in capsys.readouterr().err and not out.exists()
    assert main([NUMBERS, "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_cancelled_job_writes_nothing(tmp_path):
    from explorer.evaluation.scores import held_out_pairs
    from explorer.store.checkpoint import load_checkpoint

    ckpt = load_checkpoint(NUMBERS)
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    out = tmp_path / "search.json"
    event = threading.Event()
    seen = []

    def progress(stage, done, total):
        seen.append(stage)
        if stage.startswith("beam 2"):
            event.set()
    with pytest.raises(Cancelled):
        BEAM_CURVE.to_file(out, ckpt.model, ckpt.tokenizer, pairs, SearchSettings(beams=(1, 2), sentences=3),
                           context=RunContext(progress=progress, cancel=event))
    assert not out.exists() and seen[0].startswith("beam 1")
    with pytest.raises(ValueError, match="distinct"):
        SearchSettings(beams=(2, 2))
