"""AppTest of the Search page on the shipped numbers-en-de (tiny, fast): absurd URL settings are clamped
or dropped and written back; a job started from the page writes the curve and the page draws it (the
table is the file's numbers, exact search's search errors included); Cancel leaves no file.
"""
from __future__ import annotations

import json
import math

import pytest

from support.app_support import NUMBERS, chart, no_exception, open_app, runs, texts  # noqa: F401
from support.waiting import wait_for_job

PAGE = "webapp/pages/search.py"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(),
                                reason="needs the shipped checkpoints/numbers-en-de")


def open_page(**query):
    return open_app("numbers-en-de", PAGE, None, {k: str(v) for k, v in query.items()})


def test_absurd_url_settings_are_clamped_or_dropped(runs):
    at = open_page(n=10 ** 9, beams="1,2,banana,-4,64", penalties="none,gnmt:0.6,zzz", exact="7")
    no_exception(at)
    assert not at.error, texts(at.error)
    n_pairs = int(at.number_input(key="search_n").max)
    assert at.query_params["n"] == str(n_pairs) and at.number_input(key="search_n").value == n_pairs
    assert at.multiselect(key="search_beams").value == [1, 2] and at.query_params["beams"] == "1,2"
    assert at.multiselect(key="search_lp").value == ["none", "gnmt:0.6"]
    assert at.query_params["penalties"] == "none,gnmt:0.6"
    assert at.checkbox(key="search_exact").value is False and at.query_params["exact"] == "0"    # 7 is no switch's: off
    # beam 32 is wider than numbers-en-de's 62-piece vocabulary allows: not offered
    assert 32 not in at.multiselect(key="search_beams").options
    assert "Not computed yet" in texts(at.info)


def test_the_beam_sizes_have_room_for_every_chip(runs):
    """A multiselect writes its chips on one line and hides what does not fit: two fifths of a row shared
    with the sentence count clipped "16" and hid "32" at 1024 px in presenter mode. The two lists share a
    row of their own, the beam sizes three fifths of it."""
    at = open_page(present=1)
    no_exception(at)
    holding = {m.key: c.weight for c in at.columns for m in c.multiselect}
    assert set(holding) == {"search_beams", "search_lp"}
    assert holding["search_beams"] >= 0.6 and math.isclose(holding["search_beams"] + holding["search_lp"], 1)


def test_the_new_url_keys_are_not_the_lectures_shared_ones():
    """A page key that is also a carried one (the decoding settings' lp, beam...) would be overwritten by them."""
    from webapp.lecture import CARRIED
    from webapp.url_keys import PAGE_KEYS

    for page in ("search", "beam"):
        assert not {k.key for k in PAGE_KEYS[page]} & set(CARRIED), page


def test_a_job_started_from_the_page_draws_the_curve(runs, monkeypatch):
    from explorer.store import run_paths
    from webapp import background

    stale = runs / "search" / "an-older-result.json"               # the folder is kept within its bound
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    monkeypatch.setattr(run_paths, "ANALYSIS_KEEP_FILES", 1)
    at = open_page(n=4, beams="1,2", penalties="none", exact=1)
    at.number_input(key="search_exact_n").set_value(2).run()
    at.button(key="search_start").click().run()
    no_exception(at)
    job = next(j for j in background._JOBS.values() if str(j.path).startswith(str(runs)))
    wait_for_job(job, "the beam curve job")                   # its stage and count of work done are its progress
    assert job.state == "finished", job.error
    at.run()
    target = job.path
    assert target.parent == runs / "search" and target.is_file() and not stale.exists()
    no_exception(at)
    saved = json.loads(target.read_text())
    table = at.dataframe[0].value
    assert list(table["beam"]) == [1, 2] and len(saved["beam_curve"]) == 2
    assert list(table["BLEU"]) == [r["bleu"] for r in saved["beam_curve"]]
    assert list(table["search errors (proven)"]) == [r["search_errors"] for r in saved["beam_curve"]]
    curve = chart(at, "search_curve")
    assert {t["name"] for t in curve["data"]} == {"length penalty none"} and len(curve["data"]) == 4
    assert chart(at, "search_errors")["data"]
    assert "Exact search** was proven on" in texts(at.markdown)
    from explorer.training import jobs
    assert jobs.list_jobs() == []                                       # search/ is not a training run


def test_cancel_leaves_no_file(runs):
    from webapp import background

    at = open_page(n=500, beams="1,2,4,8,16", penalties="none")
    at.button(key="search_start").click().run()
    job = next(j for j in background._JOBS.values() if str(j.path).startswith(str(runs)) and j.active)
    at.button(key="search_cancel").click().run()
    no_exception(at)
    assert wait_for_job(job, "the cancelled beam curve to stop").state == "cancelled"
    at.run()
    assert any("cancelled" in i.value for i in at.info)
    assert not job.path.exists()


def test_a_link_with_exact_search_settings_reopens_the_computed_curve(runs):
    """Exact search's sentences and seconds are the result's settings too: a link carrying them opens the
    curve computed with them (a result file written where the page looks), not "Not computed yet"."""
    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.common.context import RunContext
    from explorer.studies.contrastive.job import BEAM_CURVE, SearchSettings
    from explorer.store.checkpoint import load_checkpoint
    from webapp.views import search as views

    ckpt = load_checkpoint(NUMBERS)
    settings = SearchSettings(beams=(1, 2), sentences=4, penalties=("none",), exact=True, exact_sentences=2,
                              exact_seconds=3)
    target = views.result_path(ckpt.sha256, settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    BEAM_CURVE.to_file(target, ckpt.model, ckpt.tokenizer, held_out_pairs(ckpt.path, ckpt.meta)[0], settings,
                       context=RunContext(meta=ckpt.meta))
    at = open_page(n=4, beams="1,2", penalties="none", exact=1, exact_n=2, exact_s=3)
    no_exception(at)
    assert (at.number_input(key="search_exact_n").value, at.number_input(key="search_exact_s").value) == (2, 3)
    assert (at.query_params["exact_n"], at.query_params["exact_s"]) == ("2", "3")
    assert "Not computed yet" not in texts(at.info)
    assert list(at.dataframe[0].value["beam"]) == [1, 2]
    assert "Exact search** was proven on" in texts(at.markdown)


def test_exact_search_settings_out_of_range_or_not_drawn_leave_the_url(runs):
    at = open_page(n=4, exact=1, exact_n=999, exact_s=0)
    no_exception(at)
    assert (at.number_input(key="search_exact_n").value, at.number_input(key="search_exact_s").value) == (4, 1)
    assert (at.query_params["exact_n"], at.query_params["exact_s"]) == ("4", "1")       # clamped, written back
    off = open_page(n=4, exact=0, exact_n=2, exact_s="x")
    no_exception(off)
    assert "exact_n" not in off.query_params and "exact_s" not in off.query_params       # no such control drawn


def test_no_search_error_is_said_and_drawn_and_empty_cells_read_as_a_dash(runs):
    """A run whose exact search found no search error drew empty axes (bars of height 0) and the two series,
    often equal, one over the other; its table showed grey "None" where a number does not exist. Now the
    zeros are markers on the zero line, the series sit apart with their own markers, a caption says there
    was no search error, the two length penalties' curves have their own markers, and an empty cell reads
    "—" with the column's help saying why."""
    from explorer.studies.contrastive.job import SearchSettings
    from explorer.store.checkpoint import load_checkpoint
    from webapp.views import search as views

    def row(beam, penalty, worse, errors):
        return {"length_penalty": penalty, "beam": beam, "bleu": 40.0, "chrf": 60.0, "length_ratio": 1.0,
                "mean_score": -2.0, "empty": 0.0, "higher_score_worse_chrf": worse, "search_errors": errors,
                "search_errors_known": errors, "seconds": 1.0}

    settings = SearchSettings(beams=(1, 2), sentences=4, penalties=("none", "gnmt:0.6"), exact=True,
                              exact_sentences=2, exact_seconds=3)
    target = views.result_path(load_checkpoint(NUMBERS).sha256, settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({
        "settings": {"sentences": 4}, "seconds": 2.0, "exact": [],
        "exact_summary": {"searched": 2, "proven": 2, "empty_proven": 0.0, "short_proven": 0.0},
        "beam_curve": [row(1, "none", None, 0.0), row(2, "none", 0.0, 0.0),
                       row(1, "gnmt:0.6", None, None), row(2, "gnmt:0.6", 0.0, None)]}))
    at = open_page(n=4, beams="1,2", penalties="none,gnmt:0.6", exact=1, exact_n=2, exact_s=3)
    no_exception(at)
    assert "Not computed yet" not in texts(at.info)
    errors = chart(at, "search_errors")["data"]
    assert len(errors) == 2 and all("markers" in t["mode"] for t in errors)
    assert errors[0]["marker"]["symbol"] != errors[1]["marker"]["symbol"]
    assert errors[0]["x"] != errors[1]["x"]                                 # side by side, not one over the other
    assert "No search error found at any beam size" in texts(at.caption)
    curve = chart(at, "search_curve")["data"]
    assert len({t["marker"]["symbol"] for t in curve}) == 2                 # one marker per length penalty
    table = at.dataframe[0].value
    assert table["higher score, worse chrF"].iloc[0] == "—"
    assert list(table["search errors (proven)"]) == ["0.000", "0.000", "—", "—"]
    assert not table.astype(str).isin(["None", "nan", "<NA>"]).any().any()
    helps = {c: v.get("help", "") for c, v in json.loads(at.dataframe[0].proto.columns).items()}
    assert "—: the smallest beam size" in helps["higher score, worse chrF"], helps
