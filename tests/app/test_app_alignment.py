"""AppTests of the Alignment page: on numbers-en-de it opens on the grammar's gold set, draws one
sentence's links over gold and "why this word", and shows the cost; a scorecard written where the
page looks is shown at once; a job started from the page writes it; a bad uploaded gold file gets a
message, not a traceback; the Bible checkpoint finds its hand-aligned gold. $EXPLORER_RUNS_DIR is temporary.
"""
from __future__ import annotations

import pytest

from explorer.store import run_paths as rp
from support.app_support import ROOT, has_chart, no_exception, open_app, runs  # noqa: F401
from support.waiting import wait_for_job

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
PAGE = "webapp/pages/alignment.py"
TEXT = "three hundred and fourteen"

pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


def pair_box(at):
    """The gold-pair selector (its key names the gold set, so that another set starts afresh)."""
    return next(s for s in at.selectbox if s.label.startswith("Sentence pair from"))


def test_opens_on_the_numbers_gold_with_one_sentence_and_the_cost(runs):
    at = open_app("numbers-en-de", PAGE, TEXT)
    no_exception(at)
    assert at.title[0].value == "Alignment"
    assert pair_box(at).value == 0                             # the current sentence is gold pair 1 (n=314)
    assert at.selectbox(key="align_layer").value == -1 and at.selectbox(key="align_head").value == -1
    pair_box(at).set_value(2).run()                            # choosing a pair makes it the shared sentence
    no_exception(at)
    shown = at.query_params["text"]
    assert (shown[0] if isinstance(shown, list) else shown) == "two thousand five hundred and ninety"
    assert at.session_state["text"] == "two thousand five hundred and ninety"
    assert has_chart(at, "align_links") and has_chart(at, "align_why_fig")
    assert any("This sentence: precision" in c.value for c in at.caption)
    assert any("Not computed yet" in i.value for i in at.info)
    assert not (runs / "align").exists()                       # opening the page writes nothing


def test_each_aligner_draws_and_a_started_job_writes_the_scorecard(runs):
    from webapp import background

    at = open_app("numbers-en-de", PAGE, TEXT)
    for kind in ("value-norm", "grad-x-input", "integrated-gradients", "attention"):
        at.selectbox(key="align_kind").set_value(kind).run()
        no_exception(at)
        assert has_chart(at, "align_links"), kind
    at.number_input(key="align_n").set_value(4).run()
    at.number_input(key="align_attr").set_value(1).run()
    at.button(key="align_start").click().run()
    no_exception(at)
    job = next(j for j in background._JOBS.values() if str(j.path).startswith(str(runs)))
    wait_for_job(job, "the alignment scorecard job")            # its stage and pair count are its progress
    assert job.state == "finished", job.error
    files = list((runs / "align").glob("*.json"))
    assert len(files) == 1
    at.run()
    no_exception(at)
    assert len(at.dataframe) == 1 and has_chart(at, "align_grid")
    table = at.dataframe[0].value
    assert "cross-attention (where predicted): best head" in set(table["aligner"])
    assert "integrated gradients" in set(table["aligner"])
    labels = {b.proto.label for b in at.get("download_button")}
    assert {"Scorecard as CSV", "The whole scorecard, per-head grids included (JSON)"} <= labels


def test_the_aligner_layer_and_head_are_in_the_url(runs):
    """A link's aligner, row, layer and head (1-based, or "mean") reopen the same view; a layer or head the
    model does not have is clamped to the nearest it has and written back, a word it does not know falls back
    to the mean, a key the page does not read is dropped."""
    at = open_app("numbers-en-de", PAGE, TEXT, {"aligner": "value-norm", "row": "shift", "layer": "2", "head": "3",
                                                "stray": "1"})
    no_exception(at)
    assert (at.selectbox(key="align_kind").value, at.radio(key="align_variant").value) == ("value-norm", "shift")
    assert (at.selectbox(key="align_layer").value, at.selectbox(key="align_head").value) == (1, 2)   # 0-based values
    assert {k: at.query_params[k] for k in ("aligner", "row", "layer", "head")} == \
        {"aligner": "value-norm", "row": "shift", "layer": "2", "head": "3"}
    assert "stray" not in at.query_params
    at.selectbox(key="align_layer").set_value(-1).run()
    assert at.query_params["layer"] == "mean"
    odd = open_app("numbers-en-de", PAGE, TEXT, {"aligner": "<script>", "layer": "99", "head": "x"})
    no_exception(odd)
    assert odd.selectbox(key="align_kind").value == "attention" and odd.query_params["aligner"] == "attention"
    assert odd.query_params["layer"] == "2" and odd.selectbox(key="align_layer").value == 1      # the last of 2
    assert odd.query_params["head"] == "mean"
    low = open_app("numbers-en-de", PAGE, TEXT, {"layer": "1", "head": "-5"})
    assert low.query_params["head"] == "1" and low.selectbox(key="align_head").value == 0


def test_a_bad_upload_gets_a_message(runs, monkeypatch):
    from webapp.views import alignment as views
    assert "outside the sentence" in views.uploaded_gold(b"a b ||| c ||| 5-0\n", "mine.align")
    assert "UTF-8" in views.uploaded_gold(b"\xff\xfe", "mine.align")
    assert "more than" in views.uploaded_gold(b"x" * (views.UPLOAD_BYTES + 1), "big.align")
    pairs, name = views.uploaded_gold(b"a b ||| c ||| 0-0 1?0\n", "mine.align")
    assert name == "mine.align" and pairs[0].possible == {(0, 0), (1, 0)}
    hostile = "../" + "\u202e" + "x" * 5000 + ".align"          # a folder, a right-to-left override, 5,000 letters
    message = views.uploaded_gold(b"\xff", hostile)
    assert "\u202e" not in message and "/" not in message and len(message) < 200
    assert views.uploaded_gold(b"a ||| b ||| 0-0\n", hostile)[1] == rp.clean_upload_name(hostile)


def test_bible_checkpoint_opens_on_its_hand_aligned_gold(runs):
    bible = ROOT / "checkpoints" / "bible-es-en"
    if not (bible / "model.safetensors").is_file():
        pytest.skip("needs checkpoints/bible-es-en")
    at = open_app("bible-es-en", PAGE, "Entonces la serpiente dijo á la mujer: No moriréis;")
    no_exception(at)
    assert pair_box(at).value == 1                             # the current sentence is gold pair 2
    assert "bible-es-en.align" in pair_box(at).label.replace("\\", "")      # a file name: Markdown-escaped
    assert has_chart(at, "align_links")


def about_seconds(text: str) -> float:
    """The seconds an "About ... on this machine" estimate says (webapp.estimates.duration's words)."""
    import re

    said = re.search(r"About (.+?) on this machine", text)
    assert said, text
    words = said.group(1)
    if words == "under a second":
        return 0.5
    parts = dict((unit, int(n)) for n, unit in re.findall(r"(\d+) (second|minute|hour)s?", words))
    assert parts, words
    return parts.get("second", 0) + 60 * parts.get("minute", 0) + 3600 * parts.get("hour", 0)


def test_a_link_with_the_scorecard_settings_reopens_the_computed_scorecard(runs):
    """The gold pairs and the pairs scored with gradients are in the URL: a link carrying them opens the
    scorecard computed with them (written where the page looks), clamped to the gold set when absurd."""
    from explorer.studies.align.job import SCORECARD
    from explorer.studies.align.scorecard import AlignSettings
    from explorer.studies.common.context import RunContext
    from explorer.store.checkpoint import load_checkpoint
    from webapp.views import alignment as views

    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.align.gold_sets import default_gold, held_out_share

    ckpt = load_checkpoint(NUMBERS)
    test_pairs = held_out_pairs(ckpt.path, ckpt.meta)[0]
    gold, name = default_gold(ckpt.meta, test_pairs)           # the page's own gold set (views.shipped_gold)
    held = held_out_share(gold, test_pairs)
    settings = AlignSettings(pairs=3, attribution_pairs=1)
    target = views.result_path(ckpt.sha256, settings, views.gold_digest(gold))
    target.parent.mkdir(parents=True, exist_ok=True)
    SCORECARD.to_file(target, ckpt.model, ckpt.tokenizer, gold, settings, context=RunContext(meta=ckpt.meta),
                      gold_name=name, held_out=held)
    at = open_app("numbers-en-de", PAGE, TEXT, {"pairs": "3", "grad": "1"})
    no_exception(at)
    assert (at.number_input(key="align_n").value, at.number_input(key="align_attr").value) == (3, 1)
    assert (at.query_params["pairs"], at.query_params["grad"]) == ("3", "1")
    assert not any("Not computed yet" in i.value for i in at.info)
    assert has_chart(at, "align_grid") and "integrated gradients" in set(at.dataframe[0].value["aligner"])
    odd = open_app("numbers-en-de", PAGE, TEXT, {"pairs": "999999", "grad": "-4"})
    no_exception(odd)
    n_gold = int(odd.number_input(key="align_n").max)
    assert (odd.query_params["pairs"], odd.query_params["grad"]) == (str(n_gold), "0")


def test_the_scorecard_says_about_how_long_it_takes_and_it_grows_with_the_pairs(runs):
    small = open_app("numbers-en-de", PAGE, TEXT, {"pairs": "2", "grad": "0"})
    no_exception(small)
    said = next(i.value for i in small.info if "Not computed yet" in i.value)
    assert "on this machine" in said and "from timing" in said
    large = open_app("numbers-en-de", PAGE, TEXT, {"pairs": "200", "grad": "24"})
    larger = next(i.value for i in large.info if "Not computed yet" in i.value)
    assert about_seconds(larger) > about_seconds(said)


def test_exports_are_named_for_the_checkpoint_and_empty_cells_read_as_a_dash(runs, monkeypatch):
    """One export convention (webapp/downloads.py): the sentence's figures and the scorecard's grid are drawn
    through downloads.chart, saving in the sidebar's format (SVG here) under the checkpoint's name; every CSV
    and JSON (the scorecard's too, once "alignment_scorecard" for every checkpoint) starts with it; the
    sentence's figures have their numbers beside them. The scorecard's empty cells (a pooled row's layer and
    head) read "—", not Streamlit's grey "None", and each such column's help says what the dash means."""
    import json

    from explorer.evaluation.scores import held_out_pairs
    from explorer.studies.align.gold_sets import default_gold, held_out_share
    from explorer.studies.align.job import SCORECARD
    from explorer.studies.align.scorecard import AlignSettings
    from explorer.studies.common.context import RunContext
    from explorer.store.checkpoint import load_checkpoint
    from support.exports import assert_named_for, recorded_downloads
    from webapp.views import alignment as views

    ckpt = load_checkpoint(NUMBERS)
    test_pairs = held_out_pairs(ckpt.path, ckpt.meta)[0]
    gold, name = default_gold(ckpt.meta, test_pairs)
    settings = AlignSettings(pairs=3, attribution_pairs=0)
    target = views.result_path(ckpt.sha256, settings, views.gold_digest(gold))
    target.parent.mkdir(parents=True, exist_ok=True)
    SCORECARD.to_file(target, ckpt.model, ckpt.tokenizer, gold, settings, context=RunContext(meta=ckpt.meta),
                      gold_name=name, held_out=held_out_share(gold, test_pairs))
    seen = recorded_downloads(monkeypatch)
    at = open_app("numbers-en-de", PAGE, TEXT, {"pairs": "3", "grad": "0"}, session={"figure_format": "svg"})
    no_exception(at)
    assert_named_for(at, seen, "numbers-en-de", {"align_links", "align_why_fig", "align_grid"})
    labels = {b["label"] for b in seen}
    assert {"This sentence: gold, every aligner's links and scores (JSON)", "These scores as CSV",
            "Scorecard as CSV"} <= labels
    table = at.dataframe[0].value
    assert (table["head"] == "—").any() and (table["layer"] == "—").any()
    assert not table.astype(str).isin(["None", "nan", "<NA>"]).any().any()
    helps = {c: v.get("help", "") for c, v in json.loads(at.dataframe[0].proto.columns).items()}
    assert helps["head"].startswith("—: the row pools the heads"), helps
