"""`python -m explorer contributions CKPT --over-training`: the mean source share at each checkpoint of a
run, found as the Contributions page finds it (the shipped numbers run: steps 150, 300, 900), every
point forced on the same pairs and equal to that checkpoint's own summary; a checkpoint alone gives
one point."""
from __future__ import annotations

import json
import shutil

from explorer.studies.contributions.__main__ import main
from explorer.studies.contributions.job import ContributionSettings, run_contributions
from explorer.data.files import read_tsv
from explorer.files.places import REPO_ROOT
from explorer.store.checkpoint import load_checkpoint

SHIPPED = REPO_ROOT / "checkpoints"


def test_every_checkpoint_of_the_run_in_step_order_on_the_same_pairs(tmp_path, capsys):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("twenty-one\teinundzwanzig\nfive hundred\tfünfhundert\nseven\tsieben\n")
    out = tmp_path / "t.json"
    assert main([str(SHIPPED / "numbers-en-de"), "--over-training", "--pairs", str(tsv), "--sentences", "2",
                 "--out", str(out)]) == 0
    assert "over training" in capsys.readouterr().out
    result = json.loads(out.read_text())
    points = result["checkpoints"]
    assert [p["step"] for p in points] == [150, 300, 900] and result["settings"]["sentences"] == 2
    assert [p["this_checkpoint"] for p in points] == [False, False, True]
    early = load_checkpoint(str(SHIPPED / "numbers-en-de-step150"))
    alone = run_contributions(early.model, early.tokenizer, read_tsv(str(tsv))[:2], ContributionSettings(sentences=2))
    assert points[0]["name"] == "numbers-en-de-step150"
    assert points[0]["mean_source_share"] == alone["summary"]["mean_source_share"]
    assert len({p["mean_source_share"] for p in points}) == 3                   # the weights differ


def test_a_checkpoint_alone_is_one_point(tmp_path, capsys):
    lone = tmp_path / "models" / "numbers"
    shutil.copytree(SHIPPED / "numbers-en-de", lone)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("five\tfünf\n")
    out = tmp_path / "t.json"
    assert main([str(lone), "--over-training", "--pairs", str(tsv), "--out", str(out)]) == 0
    assert "no other checkpoint" in capsys.readouterr().out
    assert [p["this_checkpoint"] for p in json.loads(out.read_text())["checkpoints"]] == [True]
