"""AppTests of the Graphs page on the shipped numbers-en-de, with every FFN's dictionary made by the app's
one-site job at small settings here: the graph drawn for a chosen word is run_graph's (the same kept nodes,
the same top source position), the node threshold changes what is kept without a new job, the word, foil,
threshold and picked node live in the URL and a fresh session opening the link shows the same graph from
the kept file; with a layer's dictionary missing the page offers the one job that trains it, which makes
the graph possible."""
from __future__ import annotations

import re
import shutil

import pytest

from explorer.files.names import FEATURE_CONTEXTS
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.features.job import dictionary_folder, site_result_path
from explorer.studies.features.sites import sites
from explorer.studies.graphs.__main__ import trained_dictionaries
from explorer.studies.graphs.job import GraphSettings, run_graph
from support.feature_runs import NUMBERS, SMALL, needs_numbers, numbers_dictionaries, point_app_at
from support.app_support import chart, no_exception, open_app
from support.waiting import STALL_S, wait_for_job
from webapp import background

PAGE = "webapp/pages/graphs.py"
TEXT = "one hundred and ninety four"
pytestmark = needs_numbers


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs folder holding the app's one-site job's dictionaries of every FFN of numbers-en-de."""
    root = tmp_path_factory.mktemp("runs")
    return root, numbers_dictionaries(root)


@pytest.fixture
def env(runs, monkeypatch):
    point_app_at(monkeypatch, runs[0])
    yield runs
    for job in [j for j in list(background._JOBS.values()) if j.active]:     # a page opened last may have started one
        wait_for_job(job, f"the {job.label} job to end")


def shown(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
                    for e in at.get(kind))


def drawn(at):
    """The page run again until its graph is drawn, each background job it started waited for first
    (the page benchmark's loop)."""
    from benchmarks.graphs_page import until_drawn

    return until_drawn(at, STALL_S)[0]


def node_ids(at) -> set[str]:
    """The ids of the nodes the figure draws (the marker traces' customdata)."""
    return {c[0] for t in chart(at, "graphs_figure")["data"] if t.get("mode") == "markers" for c in t["customdata"]}


def translation(at) -> str:
    return next(str(m.value).split(": ", 1)[1] for m in at.markdown if str(m.value).startswith("**Translation**"))


def test_the_graph_drawn_is_run_graphs(env):
    at = drawn(open_app("numbers-en-de", PAGE, TEXT, query={"word": "3"}))
    assert at.title[0].value.startswith("Graphs")
    assert at.selectbox(key="graphs_word").value == 2 and at.query_params["word"] == "3"
    ckpt = load_checkpoint(NUMBERS)
    target = translation(at).replace("\\", "")
    expected = run_graph(ckpt.model, ckpt.tokenizer, TEXT, trained_dictionaries(ckpt.model, env[1]),
                         GraphSettings(position=2), target=target)
    assert node_ids(at) == {n["node_id"] for n in expected["nodes"]}
    assert len(node_ids(at)) == expected["counts"]["kept_nodes"] < sum(expected["counts"][k] for k in
                                                                        ("features", "errors", "tokens"))
    top = expected["top_source_position"]
    assert f"(source position {top + 1})" in shown(at)
    assert expected["metadata"]["prompt_tokens"][top].replace("▁", "") in shown(at)
    assert "Logit vs bias + edges" in shown(at) and "Replacement score" in shown(at)
    # each kept feature node links to its Features page: its layer and feature in the link
    picked = at.selectbox(key="graphs_node").value
    layer, latent, _ = picked.split("_")
    site = expected["metadata"]["transcoder_list"][int(layer)]
    stack, index = site.split(".")[0][:3], int(site.split(".")[2]) + 1
    link = next(e.proto for e in at.get("page_link") if e.proto.label.startswith("Open feature"))
    assert f"#{latent}" in link.label and link.page == "features"
    assert f"site={stack}{index}" in link.query_string and f"feature={latent}" in link.query_string
    assert "text=" in link.query_string                       # the sentence goes along
    table = at.dataframe[0].value
    assert any(u.startswith("features?") and f"site={stack}{index}" in u and f"feature={latent}" in u
               for u in table["open"])


def test_the_threshold_changes_what_is_kept_without_a_new_job(env):
    at = drawn(open_app("numbers-en-de", PAGE, TEXT, query={"word": "3"}))
    kept = {}
    for value in (0.5, 0.95):
        at.select_slider(key="graphs_nodes").set_value(value).run()
        no_exception(at)
        assert not [j for j in background._JOBS.values() if j.active]          # pruned already: no job
        kept[value] = node_ids(at)
        assert at.query_params["nodes"] == f"{value:g}"
    assert len(kept[0.5]) < len(kept[0.95]) and kept[0.5] <= kept[0.95]


def test_a_link_reopens_the_same_graph_in_a_fresh_session(env):
    first = drawn(open_app("numbers-en-de", PAGE, TEXT, query={"word": "4", "vs": "drei", "nodes": "0.9"}))
    assert "minus the foil" in shown(first)
    query = dict(first.query_params)
    assert query["word"] == "4" and query["vs"] == "drei" and query["nodes"] == "0.9"
    ids = node_ids(first)
    started = len(background._JOBS)
    again = open_app(None, PAGE, None, query=query)           # a fresh session: only the link's URL
    no_exception(again)
    assert node_ids(again) == ids and len(background._JOBS) == started      # read from the kept file
    assert again.selectbox(key="graphs_word").value == 3 and again.text_input(key="graphs_foil").value == "drei"
    assert dict(again.query_params) == query


def test_a_hostile_link_falls_back_and_a_bad_foil_is_one_line(env):
    at = open_app("numbers-en-de", PAGE, TEXT, query={"word": "999", "nodes": "abc", "node": "<b>"})
    no_exception(at)
    assert at.selectbox(key="graphs_word").value == len(at.selectbox(key="graphs_word").options) - 1
    at = open_app("numbers-en-de", PAGE, TEXT, query={"vs": "two words"})
    no_exception(at)
    errors = [str(e.value) for e in at.error]
    assert errors and "one word" in errors[0] and "\n" not in errors[0]
    at = open_app("numbers-en-de", PAGE, TEXT, query={"vs": "A" * 100_000})          # cut to what the box takes
    no_exception(at)
    assert len(at.text_input(key="graphs_foil").value) == 60 and len(at.query_params["vs"]) == 60


def test_a_dictionary_that_cannot_be_used_is_not_called_missing(env, tmp_path, monkeypatch):
    """A layer whose dictionary is refused (here weights cut short) was listed as having "none yet" above the
    warning that said it cannot be used: the list says it has none the page can use."""
    root, sha = env
    copy = tmp_path / "runs"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("graphs"))
    weights = dictionary_folder(sha, "decoder.layers.1.ffn", "trained", copy / "features") / "sae_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(copy))
    at = open_app("numbers-en-de", PAGE, TEXT)
    no_exception(at)
    assert re.search(r"1 layer of 4 has none it can use: Decoder layer 2", shown(at)) and "none yet" not in shown(at)
    assert "Decoder layer 2's dictionary cannot be used" in " ".join(str(w.value) for w in at.warning)


def test_a_missing_dictionary_is_offered_as_one_job_that_makes_the_graph(env, tmp_path, monkeypatch):
    root, sha = env
    copy = tmp_path / "runs"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("graphs"))
    shutil.rmtree(dictionary_folder(sha, "decoder.layers.1.ffn", "trained", copy / "features").parent)
    # a dictionary kept without its training contexts (the Features page's) still serves a graph
    (dictionary_folder(sha, "encoder.layers.0.ffn", "trained", copy / "features") / FEATURE_CONTEXTS).unlink()
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(copy))
    monkeypatch.setattr("webapp.views.graph_dictionaries.APP_SETTINGS", SMALL)
    at = open_app("numbers-en-de", PAGE, TEXT, query={"change": "n3", "node": "n3", "value": "2"})
    no_exception(at)
    assert re.search(r"1 layer of 4 has none yet: Decoder layer 2", shown(at))
    # nodes of dictionaries this model lacks (a link's, the last model's) are not kept for the ones trained next
    assert not {"change", "node", "value"} & set(at.query_params)
    assert not any(c.proto.id.endswith("-graphs_figure") for c in at.get("plotly_chart"))
    button = next(b for b in at.button if b.label.startswith("Train every missing layer's dictionary"))
    button.click().run()
    no_exception(at)
    job = next(j for j in background._JOBS.values() if j.label == "Dictionaries" and str(copy) in str(j.path))
    wait_for_job(job, "the dictionaries job")
    assert job.state == "finished", job.error
    assert site_result_path(sha, "decoder.layers.1.ffn", copy / "features").is_file()
    drawn(at.run())


def test_an_intervention_sets_the_picked_nodes_and_compares_the_model_with_the_graph(env):
    at = drawn(open_app("numbers-en-de", PAGE, TEXT, query={"word": "3"}))
    picked = at.multiselect(key="graphs_change").value
    assert len(picked) == 1 and at.query_params["change"] == picked[0]           # the top node, removed
    metrics = {m.label: m for m in at.metric}
    before = float(metrics["Explained logit before"].value)
    graph_says, model_does = float(metrics["The graph predicts"].value), float(metrics["The model does"].value)
    assert graph_says != before and model_does != before                      # removing a kept node moves both
    # the same change by hand through the library, on the kept node's own site, position and feature
    from explorer.studies.graphs.intervene import NodeChange, intervene
    from explorer.studies.graphs.step import question
    layer, latent, ctx = (int(v) for v in picked[0].split("_"))
    ckpt = load_checkpoint(NUMBERS)
    tcs = trained_dictionaries(ckpt.model, env[1])
    asked = question(ckpt.model, ckpt.tokenizer, TEXT, 2, translation(at).replace("\\", ""))
    site = sites(ckpt.model)[layer]
    position = ctx if site.startswith("encoder") else ctx - len(asked.step.src)
    done = intervene(ckpt.model, tcs, asked.step, [NodeChange(site, position, latent, 0.0)])
    assert abs(done.logit_graph - graph_says) < 2e-3 and abs(done.logit_model - model_does) < 2e-3
    at.number_input(key="graphs_value").set_value(5.0).run()
    no_exception(at)
    assert at.query_params["set"] == "5"
    assert float({m.label: m for m in at.metric}["The model does"].value) != model_does
    # a link naming the node twice changes it once
    twice = drawn(open_app("numbers-en-de", PAGE, TEXT, query={"word": "3", "change": f"{picked[0]},{picked[0]}"}))
    assert twice.multiselect(key="graphs_change").value == picked and twice.query_params["change"] == picked[0]
    assert float({m.label: m for m in twice.metric}["The model does"].value) == model_does
    # emptied, the list stays in the link as "none": a fresh session from it changed the top node unasked
    at.multiselect(key="graphs_change").set_value([]).run()
    no_exception(at)
    assert at.query_params["change"] == "none" and not at.metric
    fresh = drawn(open_app("numbers-en-de", PAGE, TEXT, query=dict(at.query_params)))
    assert fresh.multiselect(key="graphs_change").value == [] and not fresh.metric
    assert "Pick feature nodes above" in " ".join(str(i.value) for i in fresh.info)


def test_a_failed_graph_says_so_without_saying_it_is_still_drawing(env, monkeypatch):
    from dataclasses import replace

    from webapp.views import graphs as views

    def fails(*args, **kwargs):
        raise RuntimeError("no graph today")

    monkeypatch.setattr(views, "GRAPH_THRESHOLDS", replace(views.GRAPH_THRESHOLDS, run=fails))
    at = open_app("numbers-en-de", PAGE, "nine thousand and nine", query={"word": "2"})
    job = max((j for j in background._JOBS.values() if j.label == "Graph"), key=lambda j: j.arrival)   # this one
    wait_for_job(job, "the failing graph job")
    at.run()
    no_exception(at)
    assert job.state == "failed" and "no graph today" in shown(at)
    assert "Drawing the graph in the background" not in shown(at)
    assert any(b.label == "Draw the graph again" for b in at.button)


def _link_query(at) -> dict[str, str]:
    from urllib.parse import parse_qsl
    link = next(e.proto for e in at.get("page_link") if e.proto.label.startswith("How was"))
    assert link.page == "graphs"
    return dict(parse_qsl(link.query_string))


def _output_pieces(at) -> list[str]:
    """The Translate page's output pieces, as its code block shows them (after the source pieces)."""
    return at.code[1].value.split(" ")


def test_translate_and_beam_search_link_a_word_to_its_graph(env):
    at = open_app("numbers-en-de", "webapp/pages/translate.py", TEXT)
    no_exception(at)
    box = at.selectbox(key="translate_graph_word")
    box.select_index(3).run()
    query = _link_query(at)
    assert query["word"] == "4" and query["text"] == TEXT
    # another translation: the box lists its words, not the last one's (it showed a word of the last one)
    at.session_state["text"] = "five hundred"
    at.run()
    no_exception(at)
    box = at.selectbox(key="translate_graph_word")
    link = next(e.proto.label for e in at.get("page_link") if e.proto.label.startswith("How was"))
    assert box.value == box.options[0] == "1. " + _output_pieces(at)[0]
    assert _output_pieces(at)[0].lstrip("▁") in link                 # the box and its link name one word
    graphs = open_app(None, PAGE, None, query=query)                     # the link, followed in a fresh session
    no_exception(graphs)
    assert graphs.selectbox(key="graphs_word").value == 3
    beam = open_app("numbers-en-de", "webapp/pages/beam.py", TEXT, query={"step": "2", "size": "3"})
    no_exception(beam)
    query = _link_query(beam)
    assert query["word"] == "2" and query["beam"] == "3" and query["text"] == TEXT    # the Beam page's search
    graphs = open_app(None, PAGE, None, query=query)
    no_exception(graphs)
    assert graphs.selectbox(key="graphs_word").value == 1
    assert graphs.query_params["beam"] == "3"


def test_the_page_benchmark_opens_a_new_word_cold_then_from_its_link(env, capsys):
    """benchmarks/graphs_page.py drives this page as the docs' page figures were measured: a word no other
    test asks about, so its graph job runs, then the link in a fresh session reads the kept graph."""
    from benchmarks import graphs_page

    assert graphs_page.main(["--text", TEXT, "--word", "5", "--timeout", str(STALL_S)]) == 0
    out = capsys.readouterr().out
    assert "word 5 (5. ▁neunzig): cold (the graph job ran)" in out, out
    assert "from its link in a fresh session" in out and "a job ran again" not in out, out
