"""The Graphs page's data: run_graph_thresholds prunes one graph at several node thresholds, each pruning the
graph run_graph makes at that threshold (the slider never shows a different graph than the command would);
a higher threshold keeps a superset; rows.node_rows reads each kept node back to the place and latent its
id names, with the influence the page sizes it by; the figure draws every kept node once, at most
MAX_LINKS_DRAWN links, the strongest."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.plots.graphs import MAX_LINKS_DRAWN, graph_figure
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.graphs.job import GraphSettings, run_graph, run_graph_thresholds
from explorer.studies.graphs.rows import layer_count, node_rows
from support.graph_helpers import random_transcoders
from support.model_helpers import one_thread  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
TEXT = "one hundred and ninety four"
THRESHOLDS = (0.5, 0.8, 0.95)
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


@pytest.fixture(scope="module")
def made():
    ckpt = load_checkpoint(str(NUMBERS), "cpu")
    transcoders = random_transcoders(ckpt.model, width=256, k=16)
    result = run_graph_thresholds(ckpt.model, ckpt.tokenizer, TEXT, transcoders, GraphSettings(position=2),
                                  thresholds=THRESHOLDS)
    return ckpt, transcoders, result


def test_each_pruning_is_run_graphs_at_its_threshold(made, one_thread):
    ckpt, transcoders, result = made
    assert result["settings"]["thresholds"] == list(THRESHOLDS)
    for threshold, graph in zip(THRESHOLDS, result["graphs"]):
        alone = run_graph(ckpt.model, ckpt.tokenizer, TEXT, transcoders,
                          GraphSettings(position=2, node_threshold=threshold))
        assert [n["node_id"] for n in graph["nodes"]] == [n["node_id"] for n in alone["nodes"]]
        assert [(l["source"], l["target"]) for l in graph["links"]] == [(l["source"], l["target"]) for l in alone["links"]]
        assert graph["top_source_position"] == alone["top_source_position"]
        assert graph["settings"]["node_threshold"] == threshold
    kept = [{n["node_id"] for n in g["nodes"]} for g in result["graphs"]]
    assert kept[0] <= kept[1] <= kept[2] and len(kept[0]) < len(kept[2])


def test_the_rows_read_each_node_back(made):
    _, _, result = made
    graph = result["graphs"][-1]
    rows = node_rows(graph)
    assert [r["id"] for r in rows] == [n["node_id"] for n in graph["nodes"]]
    sites, src_len = graph["metadata"]["transcoder_list"], graph["counts"]["source"]
    features = [r for r in rows if r["kind"] == "feature"]
    assert features and {r["kind"] for r in rows} == {"feature", "error", "token", "logit"}
    for r in features:
        layer, latent, ctx = (int(v) for v in r["id"].split("_"))
        assert (r["site"], r["latent"], r["ctx"]) == (sites[layer], latent, ctx)
        assert r["stack"] == sites[layer].split(".")[0] and r["layer"] == int(sites[layer].split(".")[2])
        assert r["position"] == (ctx if r["stack"] == "encoder" else ctx - src_len)
        assert (r["side"] == "source") == (r["stack"] == "encoder") and r["activation"] > 0
    assert sum(r["kind"] == "token" for r in rows) == graph["counts"]["tokens"]
    assert max(r["influence"] for r in features) > 0


def test_the_figure_draws_each_kept_node_once_and_the_strongest_links(made):
    _, _, result = made
    graph = result["graphs"][-1]
    rows = node_rows(graph)
    n_encoder = sum(s.startswith("encoder.") for s in graph["metadata"]["transcoder_list"])
    fig = graph_figure(rows, graph["links"], graph["metadata"]["prompt_tokens"], graph["counts"]["source"], n_encoder,
                       layer_count(graph), "t")
    drawn = [c[0] for t in fig.data if t.mode == "markers" for c in t.customdata]
    assert sorted(drawn) == sorted(r["id"] for r in rows)
    segments = sum(sum(x is None for x in t.x) for t in fig.data if t.mode == "lines")
    assert segments == min(len(graph["links"]), MAX_LINKS_DRAWN)
    logit_y = max(y for t in fig.data if t.mode == "markers" for y in t.y)
    assert logit_y == layer_count(graph) + 1                                   # the logit on top
