"""The head lab's approximate option `--single-removal loss`: single heads scored by the teacher-forced
loss rise alone, no removal decoded. The default stays exact; the JSON says which scoring was used;
the loss it reports is the loss the exact run reports; hostile values are refused with a message;
the report's rank agreement between loss rise and BLEU drop is Spearman's."""
from __future__ import annotations

import json
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from explorer.studies.heads.importance import SINGLE_REMOVALS
from explorer.studies.heads.job import LabSettings, estimate_cost, run_head_lab
from explorer.studies.heads.report import loss_rank_agreement, report
from support.model_helpers import IdTokenizer, one_thread  # noqa: F401 (a fixture)



PAIRS = [SimpleNamespace(src="5 6 7", tgt="8 9"), SimpleNamespace(src="10 11 12 13", tgt="14 15 16"),
         SimpleNamespace(src="17 18", tgt="19"), SimpleNamespace(src="20 21 22 23 24", tgt="25 26")]


@pytest.fixture(scope="module")
def runs(model):
    settings = LabSettings(sentences=4, seeds=0, points=1, batch_size=2)
    exact = run_head_lab(model, IdTokenizer(), PAIRS, settings)
    approx = run_head_lab(model, IdTokenizer(), PAIRS, LabSettings(**{**asdict(settings), "single_removal": "loss"}))
    return exact, approx


def test_the_default_is_exact_and_says_so(runs):
    exact, _ = runs
    assert LabSettings().single_removal == "bleu"
    assert exact["single_removal"] == "bleu (exact)" and exact["settings"]["single_removal"] == "bleu"
    assert all(r["bleu_drop"] is not None and r["chrf"] is not None for r in exact["single_head_removal"])


def test_the_loss_option_says_so_and_decodes_no_removal(model, runs):
    exact, approx = runs
    assert approx["single_removal"] == "loss (approximate)" and approx["settings"]["single_removal"] == "loss"
    rows = approx["single_head_removal"]
    assert len(rows) == len(exact["single_head_removal"])
    assert all(r["bleu"] is None and r["chrf"] is None and r["bleu_drop"] is None and r["chrf_drop"] is None
               for r in rows)
    assert approx["pruning"]["decodes"] < exact["pruning"]["decodes"]
    assert approx["pruning"]["full"] == exact["pruning"]["full"]            # the full model is still decoded
    assert approx["pruning"]["curves"] == exact["pruning"]["curves"]        # and the curves, as before
    settings = LabSettings(sentences=4, single_removal="loss")
    assert estimate_cost(model, settings, 4).decodes < estimate_cost(model, LabSettings(sentences=4), 4).decodes
    assert approx["pruning"]["decodes"] <= estimate_cost(model, settings, 4).decodes


def test_the_loss_scoring_is_the_loss_the_exact_run_reports(runs):
    exact, approx = runs
    keys = ("kind", "layer", "head", "loss", "loss_rise")
    assert [{k: r[k] for k in keys} for r in approx["single_head_removal"]] == \
        [{k: r[k] for k in keys} for r in exact["single_head_removal"]]
    assert any(r["loss_rise"] != 0 for r in approx["single_head_removal"])


def test_the_report_names_the_scoring_and_ranks_by_the_loss(runs):
    exact, approx = runs
    text = report(approx)
    assert "scored by loss (approximate)" in text and "Spearman" not in text
    lines = [line for line in text.splitlines() if line.startswith("  ") and line.split()[0] in
             ("encoder", "decoder", "cross") and "-" in line.split()[3:5]]
    rises = [float(line.split()[-1]) for line in lines]
    assert len(rises) == len(approx["single_head_removal"]) and rises == sorted(rises, reverse=True)
    assert "scored by bleu (exact)" in report(exact)


def test_the_pruning_curves_without_random_orders_print_no_nan(runs):
    """--seeds 0 (allowed: no baseline) printed "|nan" as the random orders' mean at every point."""
    exact, _ = runs
    text = report(exact)
    assert "nan" not in text.lower() and "--seeds 0: no random orders" in text
    after = text.split("== pruning curves", 1)[1].splitlines()[1:]
    curves = [line.split() for line in after if line.split() and line.split()[0] in ("encoder", "decoder", "cross", "all")]
    assert curves and all(cell.count(":") == 1 and "|" not in cell for curve in curves for cell in curve[1:])


def test_spearman_rank_agreement():
    rows = [{"loss_rise": x, "bleu_drop": y} for x, y in ((0.1, 1.0), (0.3, 2.0), (0.2, 1.5), (0.5, 9.0))]
    assert loss_rank_agreement(rows) == pytest.approx(1.0)
    assert loss_rank_agreement([{**r, "bleu_drop": -r["bleu_drop"]} for r in rows]) == pytest.approx(-1.0)
    ties = [{"loss_rise": x, "bleu_drop": y} for x, y in ((1, 0), (2, 0), (3, 1), (4, 2))]
    assert loss_rank_agreement(ties) == pytest.approx(0.9486833, abs=1e-6)   # mean ranks for ties
    assert loss_rank_agreement([{**r, "bleu_drop": None} for r in rows]) is None
    assert loss_rank_agreement([{**r, "bleu_drop": 0.0} for r in rows]) is None


@pytest.mark.parametrize("value", ["blue", "", "LOSS", "loss;rm", "x" * 5000, "exact"])
def test_hostile_values_are_refused_with_a_message(value, capsys, tmp_path):
    from explorer.studies.heads.__main__ import main

    assert main(["checkpoints/numbers-en-de", "--single-removal", value, "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "--single-removal" in err and "bleu" in err and "loss" in err and "Traceback" not in err
    assert len(err) < 1000 and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="single_removal"):
        LabSettings(single_removal=value)


def test_the_command_with_the_loss_option_on_a_shipped_model(tmp_path, capsys):
    from explorer.studies.heads.__main__ import main

    out = tmp_path / "numbers.json"
    assert main(["checkpoints/numbers-en-de", "--sentences", "3", "--seeds", "0", "--points", "1",
                 "--single-removal", "loss", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["single_removal"] == SINGLE_REMOVALS["loss"] == "loss (approximate)"
    assert "scored by loss (approximate)" in capsys.readouterr().out


def test_the_app_key_leaves_the_default_out():
    assert LabSettings().key() == {k: v for k, v in asdict(LabSettings()).items() if k != "single_removal"}
    assert LabSettings(single_removal="loss").key() == asdict(LabSettings(single_removal="loss"))
