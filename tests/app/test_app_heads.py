"""AppTests of the Heads page (the head lab in the app): it opens on numbers-en-de without a
result and shows the cost; a result file written by explorer.studies.heads' HEAD_LAB where the page looks
for it is shown at once (heatmaps, roles, removal histogram, pruning curves, links to the Attention
page's zoom carrying kind, layer and head); a tiny job started from the page completes and writes
that file; a cancelled job writes nothing; the approximate single-head scoring (loss rise alone) is
offered, never the default, said in words where its figure is drawn, and kept in the URL, and a link
with a scoring that does not exist gets a message. Runs directory: a temporary $EXPLORER_RUNS_DIR.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from support.app_support import ROOT, array, chart, has_chart, no_exception, open_app, runs  # noqa: F401
from support.waiting import wait_for_job

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
TEXT = "three hundred and twenty one"
PAGE = "webapp/pages/heads.py"

pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


def open_heads(**session):
    return open_app("numbers-en-de", PAGE, TEXT, session=session)


def lab_file(settings) -> Path:
    from explorer.store import run_paths as rp
    from explorer.store.checkpoint import load_checkpoint

    return rp.head_lab_file(load_checkpoint(NUMBERS).sha256, settings.key())


@pytest.fixture(scope="module")
def precomputed(tmp_path_factory):
    """A head-lab result for the first 6 test pairs, 1 random seed, in a runs directory of its own."""
    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.common.context import RunContext
    from explorer.studies.heads.job import HEAD_LAB, LabSettings
    from explorer.store.checkpoint import load_checkpoint

    ckpt = load_checkpoint(NUMBERS)
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    settings = LabSettings(sentences=6, seeds=1)
    result = HEAD_LAB.to_file(tmp_path_factory.mktemp("unused") / "r.json", ckpt.model, ckpt.tokenizer, pairs,
                              settings, context=RunContext(meta=ckpt.meta))
    return settings, result


def test_the_page_opens_without_a_result_and_shows_the_cost(runs):
    at = open_heads()
    no_exception(at)
    assert at.title[0].value == "Heads"
    assert any("Cost:" in i.value and "heads x 200 sentences" in i.value for i in at.info), [i.value for i in at.info]
    assert [b.label for b in at.button if b.key == "heads_start"] == ["Start the head lab"]   # the job is offered
    assert not has_chart(at, "heads_confidence")
    assert not (runs / "heads").exists()                      # opening the page writes nothing


def test_a_result_file_is_shown_with_its_figures_and_head_links(runs, precomputed):
    import json

    settings, result = precomputed
    target = lab_file(settings)
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(result))
    at = open_heads(heads_n=6, heads_seeds=1)
    no_exception(at)
    assert not any("Cost:" in i.value for i in at.info)      # shown at once, no job offered
    assert "heads_start" not in [b.key for b in at.button]
    n_heads = {k: sum(1 for r in result["stats"] if r["kind"] == k) for k in ("encoder", "decoder", "cross")}
    for key in ("heads_confidence", "heads_entropy", "heads_importance"):
        spec = chart(at, key)
        heatmaps = [t for t in spec["data"] if t["type"] == "heatmap"]
        assert len(heatmaps) == 3
        assert sorted(array(t["z"]).size for t in heatmaps) == sorted(n_heads.values())
    conf = [t for t in chart(at, "heads_confidence")["data"] if t["type"] == "heatmap"][0]
    first = next(r for r in result["stats"] if r["kind"] == "encoder" and r["layer"] == 1 and r["head"] == 1)
    assert array(conf["z"])[0, 0] == pytest.approx(first["confidence"])
    removal = chart(at, "heads_removal")["data"][0]
    assert sorted(array(removal["x"])) == pytest.approx(sorted(r["bleu_drop"] for r in result["single_head_removal"]))
    pruning = chart(at, "heads_pruning")["data"]
    assert {t["name"] for t in pruning} == {"least important first", "random order (mean of seeds)"}
    assert len(pruning) == 8                                  # 4 scopes x (importance, random)
    table = at.dataframe[0].value
    assert len(table) == len(result["roles"]) and {"kind", "layer", "head", "role", "rule", "figure"} <= set(table)
    assert list(table["role"]) == [r["role"] or "no rule matched" for r in result["roles"]]
    assert "None" not in set(table["role"]) | set(table["rule"]) and table["role"].notna().all()   # never "None"
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Roles, importance and BLEU drop as CSV", "The whole head lab, pruning curves included (JSON)"} <= labels
    for row, role in zip(table.itertuples(), result["roles"]):
        url = urlparse(row.zoom)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        assert url.path == "attention"
        assert (q["kind"], q["layer"], q["head"]) == (role["kind"], str(role["layer"]), str(role["head"]))
        assert q["ckpt"] == "numbers-en-de" and q["text"] == TEXT
    links = [e for e in at.get("page_link") if e.proto.page == "attention"]
    assert links, "no link to the Attention page"
    q = {k: v[-1] for k, v in parse_qs(links[0].proto.query_string).items()}
    r0 = result["roles"][0]
    assert (q["kind"], q["layer"], q["head"]) == (r0["kind"], str(r0["layer"]), str(r0["head"]))


def test_a_job_started_from_the_page_writes_the_result_and_shows_it(runs):
    from explorer.studies.heads.job import LabSettings
    from webapp import background

    at = open_heads(heads_n=4, heads_seeds=1)
    target = lab_file(LabSettings(sentences=4, seeds=1))
    assert not target.exists()
    at.button(key="heads_start").click().run()
    no_exception(at)
    job = background.job_for(target)
    assert job is not None
    wait_for_job(job, "the head lab job")                     # its stage and count of work done are its progress
    assert job.state == "finished", job.error
    assert target.exists()
    at.run()
    no_exception(at)
    assert has_chart(at, "heads_confidence") and has_chart(at, "heads_pruning")
    assert target.parent == runs / "heads"
    from explorer.training import jobs
    assert target.parent.is_dir() and jobs.list_jobs() == []     # heads/ is not a training run


def test_cancel_leaves_no_file(runs):
    from explorer.studies.heads.job import LabSettings
    from webapp import background
    from webapp import study_job

    at = open_heads(heads_n=300, heads_seeds=3)
    target = lab_file(LabSettings(sentences=300, seeds=3))
    at.button(key="heads_start").click().run()
    job = background.job_for(target)
    assert job is not None and job.active
    from explorer.studies.heads.job import HEAD_LAB
    again = study_job.start(HEAD_LAB, target, "Head lab", str(NUMBERS), lambda _: ([],),
                            LabSettings(sentences=300, seeds=3))
    assert again is job                                       # one job per weights + settings at a time
    at.button(key="heads_cancel").click().run()
    no_exception(at)
    wait_for_job(job, "the cancelled head lab to stop")       # a cancel takes effect at the next progress report
    assert not job.active and job.state == "cancelled"
    at.run()
    no_exception(at)
    assert any("cancelled" in i.value for i in at.info)
    assert not target.exists()
    assert not any((runs / "heads").glob("*")) if (runs / "heads").exists() else True


def test_lab_settings_live_in_the_url(runs):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"lab_n": "20", "lab_seeds": "1", "lab_forced": "output"})
    no_exception(at)
    assert (at.session_state["heads_n"], at.session_state["heads_seeds"], at.session_state["heads_forced"]) == \
        (20, 1, "output")
    at.number_input(key="heads_n").set_value(7).run()
    assert at.query_params["lab_n"] == ["7"] or at.query_params["lab_n"] == "7"
    at = open_app("numbers-en-de", PAGE, TEXT, query={"lab_n": "9999", "lab_seeds": "x"})    # clamped; a word: default
    no_exception(at)
    assert (at.session_state["heads_n"], at.session_state["heads_seeds"]) == (500, 3)
    assert at.query_params["lab_n"] == "500"


def test_the_approximate_scoring_is_offered_not_the_default_and_said_where_it_is_drawn(runs):
    import json

    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.common.context import RunContext
    from explorer.studies.heads.job import HEAD_LAB, LabSettings
    from explorer.store.checkpoint import load_checkpoint

    at = open_heads()
    radio = at.radio(key="heads_single")
    assert radio.value == "bleu" and list(radio.options) == ["BLEU drop: decode each removal (exact)",
                                                             "loss rise only (approximate, faster)"]
    exact_cost = next(i.value for i in at.info if "Cost:" in i.value)
    radio.set_value("loss").run()
    no_exception(at)
    assert at.query_params["lab_single"] in ("loss", ["loss"])
    loss_cost = next(i.value for i in at.info if "Cost:" in i.value)
    assert loss_cost != exact_cost and "greedy decodes" in loss_cost       # fewer decodes: none per head

    ckpt = load_checkpoint(NUMBERS)
    settings = LabSettings(sentences=3, seeds=0, single_removal="loss")
    target = lab_file(settings)
    assert target != lab_file(LabSettings(sentences=3, seeds=0))
    target.parent.mkdir(parents=True, exist_ok=True)
    result = HEAD_LAB.to_file(target, ckpt.model, ckpt.tokenizer, held_out_pairs(ckpt.path, ckpt.meta)[0], settings,
                              context=RunContext(meta=ckpt.meta))
    assert json.loads(target.read_text())["single_removal"] == "loss (approximate)"
    at = open_app("numbers-en-de", PAGE, TEXT, query={"lab_n": "3", "lab_seeds": "0", "lab_single": "loss"})
    no_exception(at)
    assert at.session_state["heads_single"] == "loss"
    assert any("loss rise alone (approximate)" in c.value and "no BLEU drop" in c.value for c in at.caption)
    removal = chart(at, "heads_removal")
    assert "approximate" in removal["layout"]["title"]["text"]
    assert sorted(array(removal["data"][0]["x"])) == pytest.approx(sorted(r["loss_rise"]
                                                                          for r in result["single_head_removal"]))
    table = at.dataframe[0].value
    assert "loss rise (approximate)" in table and "BLEU drop" not in table


@pytest.mark.parametrize("value", ["blue", "LOSS", "<b>x</b>", "x" * 3000])
def test_a_link_with_an_unknown_scoring_gets_a_message_and_the_exact_default(runs, value):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"lab_single": value})
    no_exception(at)
    warnings = [w.value for w in at.warning if "single-head removal scored by" in w.value]
    assert len(warnings) == 1 and "the exact scoring (BLEU drop) is shown instead" in warnings[0] and len(warnings[0]) < 400
    assert at.session_state["heads_single"] == "bleu" and "lab_single" not in at.query_params


def test_an_unknown_scoring_after_a_chosen_one_names_the_one_kept(runs):
    """A session that chose the approximate scoring keeps it when a link's lab_single is unknown: the
    message names the scoring shown, not the default."""
    at = open_app("numbers-en-de", PAGE, TEXT, query={"lab_single": "loss"})
    at.query_params["lab_single"] = "bogus"
    at.run()
    no_exception(at)
    warnings = [w.value for w in at.warning if "single-head removal scored by" in w.value]
    assert len(warnings) == 1 and "the approximate scoring (loss rise) is shown instead" in warnings[0]
    assert at.session_state["heads_single"] == "loss" and at.query_params["lab_single"] in ("loss", ["loss"])


def test_the_cost_says_about_how_long_and_it_grows_with_the_sentences(runs):
    """Before a long run the page says about how long it takes on this machine (a small piece of the lab's
    work timed on the page's model, times the library's Cost), and more sentences take longer. Not its
    value: no timing goal."""
    import re

    def about(at) -> float:
        said = next(i.value for i in at.info if "Cost:" in i.value)
        found = re.search(r"About (.+?) on this machine", said)
        assert found and "from timing" in said, said
        if found.group(1) == "under a second":
            return 0.5
        parts = {unit: int(n) for n, unit in re.findall(r"(\d+) (second|minute|hour)s?", found.group(1))}
        return parts.get("second", 0) + 60 * parts.get("minute", 0) + 3600 * parts.get("hour", 0)

    few = open_app("numbers-en-de", PAGE, TEXT, query={"lab_n": "10"})
    no_exception(few)
    many = open_app("numbers-en-de", PAGE, TEXT, query={"lab_n": "500"})
    no_exception(many)
    assert about(many) > about(few)


def test_exports_are_named_for_the_checkpoint_and_empty_cells_read_as_a_dash(runs, precomputed, monkeypatch):
    """One export convention (webapp/downloads.py): every figure drawn through downloads.chart, saving in the
    sidebar's format (SVG here) under the checkpoint's name; every CSV and JSON named after the checkpoint; the
    three grids' numbers beside them as CSV. A head no rule names has no figure: its cell reads "—" (not
    Streamlit's grey "None"), and the column's help says what the dash means."""
    import copy
    import json

    from support.exports import assert_named_for, recorded_downloads

    settings, result = precomputed
    result = copy.deepcopy(result)
    result["roles"][0].update(role=None, rule=None, value=None)              # a head no rule names
    target = lab_file(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result))
    seen = recorded_downloads(monkeypatch)
    at = open_heads(heads_n=6, heads_seeds=1, figure_format="svg")
    no_exception(at)
    assert_named_for(at, seen, "numbers-en-de", {"heads_confidence", "heads_entropy", "heads_importance",
                                                 "heads_removal", "heads_pruning"})
    assert "Confidence, entropy and importance per head (CSV)" in {b["label"] for b in seen}
    table = at.dataframe[0].value
    assert table["figure"][0] == "—" and table["role"][0] == "no rule matched"
    shown = table[["figure", "importance", "BLEU drop"]].astype(str)
    assert not shown.isin(["None", "nan", "<NA>"]).any().any()
    helps = {name: c.get("help", "") for name, c in json.loads(at.dataframe[0].proto.columns).items()}
    assert "—: no rule matched" in helps["figure"], helps
