"""Interventions on feature nodes: the graph's prediction is its edges (removing nodes moves the logit by
minus the sum of their edges into it), the model's answer is the model with the feature's share moved
(checked against a plain hook written here), a node set to its own value changes nothing either way, and
the causal check ranks by influence and compares like with like."""
from __future__ import annotations

import pytest
import torch

from explorer.studies.graphs.attribution import attribute
from explorer.studies.graphs.intervene import CausalCheck, NodeChange, causal_check, intervene
from explorer.studies.graphs.replacement import Replacement
from support.graph_helpers import STEP, random_transcoders
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)
from support.numerics import float32_atol, in_float64, model_atol

NORMS = [pytest.param(False, id="post-norm"), pytest.param(True, id="pre-norm")]


@pytest.fixture(scope="module", params=NORMS)
def setting(request):
    """A float64 model (edges and forward differences agree to rounding), its transcoders, its graph."""
    model = in_float64(make_model(norm_first=request.param))
    tcs = {site: tc.double() for site, tc in random_transcoders(model).items()}
    graph = attribute(Replacement(model, tcs, STEP), batch=64)
    return model, tcs, graph


def _change(graph, index: int, value: float = 0.0) -> NodeChange:
    n = graph.nodes
    return NodeChange(n.sites[int(n.feature_site[index])], int(n.feature_pos[index]), int(n.feature_id[index]), value)


def _picks(graph) -> list[int]:
    """Three feature nodes: one of the encoder's, one of the decoder's, the one with the largest edge into
    the logit."""
    n = graph.nodes
    on_encoder = n.on_encoder(n.feature_site)
    strongest = int(graph.adjacency[n.logit, :n.n_features].abs().argmax())
    return sorted({int(on_encoder.nonzero()[0, 0]), int((~on_encoder).nonzero()[0, 0]), strongest})


def test_a_node_set_to_its_own_value_changes_nothing(setting):
    model, tcs, graph = setting
    n = graph.nodes
    changes = [_change(graph, i, float(n.feature_act[i])) for i in _picks(graph)]
    got = intervene(model, tcs, STEP, changes, graph.rep)
    assert got.logit_model == pytest.approx(got.logit_before, abs=1e-9)
    assert got.logit_graph == pytest.approx(got.logit_before, abs=1e-9)
    assert got.logprob_model == pytest.approx(got.logprob_before, abs=1e-9)


def test_removing_nodes_moves_the_graphs_logit_by_minus_their_edges(setting):
    model, tcs, graph = setting
    picks = _picks(graph)
    got = intervene(model, tcs, STEP, [_change(graph, i) for i in picks], graph.rep)
    edges = float(graph.adjacency[graph.nodes.logit, picks].sum())
    atol = float32_atol(float(graph.adjacency[graph.nodes.logit, picks].abs().sum()), len(picks))  # edges: float32
    assert abs(edges) > 1e-3                                                    # the test can tell
    assert got.graph_change == pytest.approx(-edges, abs=atol)
    half = intervene(model, tcs, STEP, [_change(graph, i, 0.5 * float(graph.nodes.feature_act[i])) for i in picks],
                     graph.rep)
    assert half.graph_change == pytest.approx(-0.5 * edges, abs=atol)          # linear in the node's value


def test_the_models_answer_is_the_feature_taken_out_of_its_ffn_output(setting):
    """A second way: a hook written here subtracts the feature's write a * W_dec[f] at its position."""
    model, tcs, graph = setting
    n = graph.nodes
    for index in _picks(graph):
        change = _change(graph, index)
        act = float(n.feature_act[index])
        write = act * tcs[change.site].W_dec[change.feature].detach()                      # [d]

        def hook(_module, _args, output, at=change.position, write=write):
            output = output.clone()
            output[:, at] -= write
            return output

        ffn = dict(model.named_modules())[change.site]
        handle = ffn.register_forward_hook(hook)
        try:
            with torch.no_grad():
                plain = model.logits(graph.rep.src_ids, graph.rep.prefix_ids)[0, STEP.position, STEP.token]
        finally:
            handle.remove()
        got = intervene(model, tcs, STEP, [change], graph.rep)
        assert got.logit_model == pytest.approx(float(plain), abs=1e-9)
        assert abs(got.model_change) > 1e-9 or abs(act) < 1e-9


def test_the_graph_and_the_model_agree_on_a_feature_of_the_last_layer_whose_logit_path_is_linear():
    """On a pre-norm model without later features, removing a decoder feature of the last layer at the traced
    position: the model's change equals the graph's up to the final norm's live scale (small, not zero)."""
    model = in_float64(make_model(norm_first=True))
    tcs = {site: tc.double() for site, tc in random_transcoders(model).items()}
    graph = attribute(Replacement(model, tcs, STEP), batch=64)
    n = graph.nodes
    last = len(n.sites) - 1
    at_k = ((n.feature_site == last) & (n.feature_pos == STEP.position)).nonzero()[:, 0]
    index = int(at_k[graph.adjacency[n.logit, at_k].abs().argmax()])
    got = intervene(model, tcs, STEP, [_change(graph, index)], graph.rep)
    assert got.graph_change != 0
    assert got.model_change == pytest.approx(got.graph_change, rel=0.5)       # same sign and size


def test_what_is_not_a_node_is_refused_in_one_line(setting):
    model, tcs, graph = setting
    n = graph.nodes
    site, pos = n.sites[0], int(n.feature_pos[0])
    firing = set(n.feature_id[(n.feature_site == 0) & (n.feature_pos == pos)].tolist())
    silent = next(f for f in range(tcs[site].width) if f not in firing)
    for changes, words in (([NodeChange(site, pos, silent)], "does not fire"),
                           ([NodeChange("encoder.layers.9.ffn", 0, 0)], "not one of the model's FFN sites"),
                           ([], "at least one")):
        with pytest.raises(ValueError, match=words) as caught:
            intervene(model, tcs, STEP, changes, graph.rep)
        assert "\n" not in str(caught.value)


def test_the_causal_check_removes_the_most_influential_nodes_and_random_ones(setting):
    model, tcs, graph = setting
    got = causal_check(model, tcs, graph, k=5, generator=torch.Generator().manual_seed(0))
    assert len(got.top) == len(got.random) == 5
    again = intervene(model, tcs, STEP, got.top, graph.rep)
    assert got.drop_top == pytest.approx(again.logprob_before - again.logprob_model, abs=1e-12)
    everything = causal_check(model, tcs, graph, k=graph.nodes.n_features + 5,
                              generator=torch.Generator().manual_seed(1))
    assert set(everything.top) == set(everything.random)                   # k >= features: the same set
    assert everything.drop_top == pytest.approx(everything.drop_random, abs=1e-9)


@pytest.mark.parametrize("top, random, holds", [(2.0, 1.0, True), (1.9, 1.0, False), (0.5, -1.0, True),
                                                 (0.0, -1.0, False), (-0.5, -2.0, False)])
def test_the_check_holds_when_the_top_drop_is_positive_and_twice_the_random_one(top, random, holds):
    assert CausalCheck(top, random, (), ()).holds is holds


def test_a_float32_intervention_on_the_graphs_own_values_is_exact_to_rounding():
    model = make_model()
    tcs = random_transcoders(model)
    rep = Replacement(model, tcs, STEP)
    active = rep.active[rep.sites[-1]]
    change = NodeChange(rep.sites[-1], int(active.positions[0]), int(active.features[0]), float(active.values[0]))
    got = intervene(model, tcs, STEP, [change], rep)
    atol = model_atol(model, rep.model_logits) + float32_atol(abs(got.logit_before), 64)
    assert abs(got.logit_graph - got.logit_before) <= atol
    assert abs(got.logit_model - got.logit_before) <= atol
