"""A graph result file damaged inside (its two keys whole, a value wrong) is said in one message naming the
field, never a traceback or a node shown at a wrong place: the Graphs page reads it with damage() first, and
rows.node_rows and graph_at refuse what they cannot place (a ctx_idx of -1 was shown as the last piece, a
layer of -1 as the last site, and a short node_influence dropped nodes in silence)."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from explorer.store.checkpoint import load_checkpoint
from explorer.studies.graphs.job import GraphSettings, run_graph_thresholds
from explorer.studies.graphs.rows import check_graph, node_rows, source_words
from support.graph_helpers import random_transcoders
from webapp.views.graphs import damage, graph_at

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


@pytest.fixture(scope="module")
def result():
    ckpt = load_checkpoint(str(NUMBERS), "cpu")
    transcoders = random_transcoders(ckpt.model, width=256, k=16)
    return run_graph_thresholds(ckpt.model, ckpt.tokenizer, "one hundred and ninety four", transcoders,
                                GraphSettings(position=2), thresholds=(0.95, 0.5))    # the first keeps feature nodes


def _feature(graph: dict) -> int:
    return next(i for i, n in enumerate(graph["nodes"]) if n["feature_type"] == "cross layer transcoder")


def test_a_whole_result_passes(result):
    assert damage(result) is None
    for graph in result["graphs"]:
        check_graph(graph)
        assert len(node_rows(graph)) == len(graph["nodes"])
    assert graph_at(result, 0.9) is result["graphs"][0]


def _set(path: str, value):
    """Sets the field at `path` (dots; a number indexes a list; "F" the first feature node) of a copy."""
    def change(result: dict) -> dict:
        changed = copy.deepcopy(result)
        *parents, last = path.split(".")
        at = changed
        for key in parents:
            at = at[_feature(changed["graphs"][0]) if key == "F" else int(key) if key.isdigit() else key]
        last = int(last) if last.isdigit() else last
        if value is KeyError:
            del at[last]
        else:
            at[last] = value(at[last]) if callable(value) else value
        return changed
    return change


RESULT_LEVEL = {                                         # graph_at's fields: (change, field named)
    "no thresholds": (_set("settings.thresholds", KeyError), "settings.thresholds"),
    "no graph": (_set("graphs", []), "graphs"),
    "graphs not a list": (_set("graphs", "x"), "graphs"),
    "thresholds of text": (_set("settings.thresholds", ["a", "b"]), "settings.thresholds"),
}
GRAPH_LEVEL = {                                          # what node_rows reads: (change, field named)
    "ctx_idx -1": (_set("graphs.0.nodes.F.ctx_idx", -1), "ctx_idx: -1"),
    "ctx_idx huge": (_set("graphs.0.nodes.F.ctx_idx", 10 ** 6), "ctx_idx"),
    "layer -1": (_set("graphs.0.nodes.F.layer", -1), "layer"),
    "layer of text": (_set("graphs.0.nodes.F.layer", "x"), "layer"),
    "layer past the sites": (_set("graphs.0.nodes.F.layer", "99"), "layer"),
    "a short node_influence": (_set("graphs.0.node_influence", lambda v: v[:-1]), "node_influence"),
    "counts.source of text": (_set("graphs.0.counts.source", "1"), "counts.source"),
    "a node id that names no latent": (_set("graphs.0.nodes.F.node_id", "x"), "node_id"),
    "no prompt tokens": (_set("graphs.0.metadata.prompt_tokens", KeyError), "prompt_tokens"),
    "a NaN node influence": (_set("graphs.0.node_influence.0", float("nan")), "node_influence"),
    "an infinite activation": (_set("graphs.0.nodes.F.activation", float("-inf")), "activation"),
}
PAGE_LEVEL = {                                           # what the rest of the page reads
    "no scores": (_set("graphs.0.scores", KeyError), "scores"),
    "a top source position past the source": (_set("graphs.0.top_source_position", 10 ** 6), "top_source_position"),
    "links of text": (_set("graphs.0.links", "x"), "links"),
    "a count of text": (_set("graphs.0.counts.kept_nodes", "3"), "counts.kept_nodes"),
    # numbers no float holds, or that compare false with everything: 10**400 was an OverflowError in the page
    "a logit past any float": (_set("graphs.0.explained.logit", 10 ** 400), "explained"),
    "an infinite score": (_set("graphs.0.scores.replacement", float("inf")), "scores"),
    "a NaN link weight": (_set("graphs.0.links.0.weight", float("nan")), "links"),
    "a NaN position influence": (_set("graphs.0.position_influence.0", float("nan")), "position_influence"),
}


@pytest.mark.parametrize("case", list(RESULT_LEVEL))
def test_damaged_thresholds_or_graphs_are_one_value_error(result, case):
    change, field = RESULT_LEVEL[case]
    damaged = change(result)
    assert field in damage(damaged)
    with pytest.raises(ValueError, match=re.escape(field)):
        graph_at(damaged, 0.8)


@pytest.mark.parametrize("case", list(GRAPH_LEVEL))
def test_a_damaged_node_is_refused_naming_its_field(result, case):
    change, field = GRAPH_LEVEL[case]
    damaged = change(result)
    said = damage(damaged)
    assert said is not None and said.startswith("graphs[0].") and field in said
    with pytest.raises(ValueError, match=re.escape(field)):
        node_rows(damaged["graphs"][0])
    assert damage(result) is None                                         # the copy was changed, not the result


@pytest.mark.parametrize("case", list(PAGE_LEVEL))
def test_a_damaged_figure_field_is_said_before_the_page_reads_it(result, case):
    change, field = PAGE_LEVEL[case]
    said = damage(change(result))
    assert said is not None and field in said


def test_source_words_refuse_a_source_count_past_the_prompt(result):
    damaged = _set("graphs.0.counts.source", 10 ** 6)(result)
    with pytest.raises(ValueError, match="counts.source"):
        source_words(damaged["graphs"][0])
