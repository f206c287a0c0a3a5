"""Influence, pruning and the two scores, against plain second computations: influence as the closed form
w Â (I - Â)^-1 by a linear solve; scores on graphs whose answer is known; pruning keeps what it must."""
from __future__ import annotations

import pytest
import torch

from explorer.studies.graphs import influence
from explorer.studies.graphs.attribution import attribute
from explorer.studies.graphs.nodes import Nodes
from explorer.studies.graphs.replacement import Replacement
from support.graph_helpers import STEP, random_transcoders
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)
from support.numerics import float32_atol


def chain_nodes(n_features: int = 2) -> Nodes:
    """A one-site graph: F features and one error at the one source position, a source and a prefix token,
    the logit."""
    return Nodes(sites=("encoder.layers.0.ffn",), n_encoder=1, src_len=1, prefix_len=1,
                 feature_site=torch.zeros(n_features, dtype=torch.long),
                 feature_pos=torch.zeros(n_features, dtype=torch.long),
                 feature_id=torch.arange(n_features), feature_act=torch.ones(n_features),
                 error_site=torch.zeros(1, dtype=torch.long), error_pos=torch.zeros(1, dtype=torch.long))


@pytest.fixture(scope="module")
def graph():
    model = make_model()
    return attribute(Replacement(model, random_transcoders(model), STEP), batch=64)


def test_influence_is_the_closed_form(graph):
    norm = influence.normalised(graph.adjacency).double()
    w = influence.logit_weights(graph.nodes).double()
    eye = torch.eye(len(w), dtype=torch.float64)
    closed = torch.linalg.solve((eye - norm).T, (w @ norm))         # x (I - Â) = w Â
    got = influence.influence(norm, w)
    assert (got - closed).abs().max() <= 1e-12 * max(1.0, float(closed.abs().max()))
    inputs = got[graph.nodes.error_start:graph.nodes.logit].sum()   # errors and tokens: all of it arrives there
    assert abs(float(inputs) - 1.0) <= float32_atol(1.0, len(w))  # rows normalised in float32


def test_scores_are_one_without_errors_and_zero_through_errors_only():
    n = chain_nodes(2)                          # nodes: f0, f1, err, tok_src, tok_prefix, logit
    a = torch.zeros(n.size, n.size)
    a[n.logit, 0], a[n.logit, 1] = 2.0, -1.0    # the logit reads both features
    a[0, n.token_start] = 1.0                   # each feature reads the source token
    a[1, n.token_start] = 3.0
    assert influence.scores(a, n) == pytest.approx((1.0, 1.0))
    b = a.clone()
    b[0, n.token_start], b[0, n.error_start] = 0.0, 1.0      # feature 0 now reads the error only
    replacement, completeness = influence.scores(b, n)
    share = 2 / 3                                            # the logit's share through feature 0
    assert replacement == pytest.approx(1 - share)
    # every node weighs its influence (the logit its weight 1): f0 2/3, f1 1/3, the error 2/3, the source
    # token 1/3, the logit 1, 3 in all; only f0's inputs are errors (inputs have none): 1 - (2/3) / 3
    assert completeness == pytest.approx(1 - share / 3)
    c = torch.zeros_like(a)
    c[n.logit, n.error_start] = 1.0
    assert influence.scores(c, n)[0] == pytest.approx(0.0)


def test_pruning_keeps_tokens_and_the_logit_and_only_edges_between_kept_nodes(graph):
    n = graph.nodes
    for node_threshold, edge_threshold in ((0.5, 0.9), (0.8, 0.98), (1.0, 1.0)):
        pruned = influence.prune(graph.adjacency, n, node_threshold, edge_threshold)
        keep, edges = pruned.node_mask, pruned.edge_mask
        assert keep[n.token_start:].all()
        assert not (edges & ~(keep[:, None] & keep[None, :])).any()
        kept_middle = keep[:n.token_start].nonzero(as_tuple=True)[0]
        assert all(edges[:, i].any() for i in kept_middle.tolist())          # each kept node sends an edge
    small = influence.prune(graph.adjacency, n, 0.5, 0.9).node_mask.sum()
    large = influence.prune(graph.adjacency, n, 0.95, 0.99).node_mask.sum()
    assert small < large


def test_the_cut_holds_the_asked_share():
    scores = torch.tensor([5.0, 3.0, 1.0, 1.0])
    assert influence.cut_at(scores, 0.5) == 5.0            # 5 of 10 reaches half
    assert influence.cut_at(scores, 0.8) == 3.0
    assert influence.cut_at(scores, 1.0) == 1.0


def test_position_influence_shares_out_what_reaches_the_inputs(graph):
    n = graph.nodes
    reach = influence.influence(influence.normalised(graph.adjacency), influence.logit_weights(n))
    at = influence.position_influence(reach, n)
    assert at.shape == (n.src_len + n.prefix_len,)
    assert float(at.sum()) == pytest.approx(float(reach[n.error_start:n.logit].sum()), rel=1e-6)
    # each position by a plain loop: its token node, and every error node whose site and position land
    # there (an encoder node at source position p, a decoder node at prefix position t: S + t)
    plain = [float(reach[n.token_start + c]) for c in range(n.n_tokens)]
    for e in range(n.n_errors):
        site, pos = int(n.error_site[e]), int(n.error_pos[e])
        plain[pos if site < n.n_encoder else n.src_len + pos] += float(reach[n.error_start + e])
    assert at.tolist() == pytest.approx(plain, rel=1e-5, abs=1e-9)
    decoder_errors = [e for e in range(n.n_errors) if int(n.error_site[e]) >= n.n_encoder]
    assert decoder_errors and any(float(reach[n.error_start + e]) > 0 for e in decoder_errors)   # the test has teeth


def test_a_threshold_outside_zero_to_one_is_refused(graph):
    with pytest.raises(ValueError, match="in 0..1"):
        influence.prune(graph.adjacency, graph.nodes, 1.5)
