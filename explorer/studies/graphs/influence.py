"""How much each node and edge carries to the explained logit, the graph pruned to what carries most, and
the two scores of how much of the computation the features explain: the definitions of Ameisen et al.
2025 ("Circuit Tracing", Appendix: graph pruning, and the replacement and completeness scores) as the
open tool circuit-tracer computes them, written here for this project's node order (nodes.py).

Influence. Each row of |adjacency| is normalised to sum 1 (a target's inputs as shares of all that flows
into it), Â. A node's influence is what reaches it from the logit along every path,
w Â + w Â^2 + ..., w the logit's weight (1 on the logit node). The graph is acyclic (an edge only runs
from an earlier layer, or from the embeddings), so Â is nilpotent and the sum ends after at most
N steps (in practice the number of layers plus two).

Pruning. Nodes ranked by influence keep the smallest top set holding `node_threshold` of the total
(tokens and the logit always kept); in the graph left, each edge scores its share Â times the influence
of its target (the logit's weight included), and edges keep the top set holding `edge_threshold`; then
feature and error nodes without a kept outgoing edge, and feature nodes without a kept incoming one, go,
until nothing changes.

Scores. Replacement: of the influence reaching the graph's inputs (tokens and errors: the nodes with no
incoming edges), the share reaching tokens: 1 when features alone carry the tokens to the logit.
Completeness: every node's share of incoming edges that come from a non-error node, averaged with the
weight of its influence (plus the logit's weight): partial credit where errors carry part.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.studies.graphs.nodes import Nodes


def normalised(adjacency: torch.Tensor) -> torch.Tensor:
    """|A| with each row summing to 1 (rows with no input stay 0). [N, N]"""
    a = adjacency.abs()
    return a / a.sum(1, keepdim=True).clamp_min(1e-10)


def influence(norm: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """w Â + w Â^2 + ... for the normalised matrix Â [N, N] and weights w [N]. [N]"""
    step = weights @ norm                                                         # [N]
    total = step.clone()
    for _ in range(norm.shape[0]):
        if not step.any():
            return total
        step = step @ norm
        total += step
    raise ValueError("the graph has a cycle: influence does not end")


def logit_weights(nodes: Nodes) -> torch.Tensor:
    w = torch.zeros(nodes.size)
    w[nodes.logit] = 1.0
    return w


def cut_at(scores: torch.Tensor, fraction: float) -> torch.Tensor:
    """The smallest score among the top scores that together hold `fraction` of their sum."""
    ranked = scores.sort(descending=True).values                                  # [n]
    share = ranked.cumsum(0) / ranked.sum().clamp_min(1e-30)
    index = min(int(torch.searchsorted(share, torch.tensor(fraction, dtype=share.dtype))), len(ranked) - 1)
    return ranked[index]


@dataclass(frozen=True)
class Pruned:
    node_mask: torch.Tensor          # [N] bool: kept nodes
    edge_mask: torch.Tensor          # [N, N] bool: kept edges (target, source)
    influence: torch.Tensor          # [N] each node's influence on the logit (whole graph)
    cumulative: torch.Tensor         # [N] the share of all influence held by the nodes ranked up to this one


def prune(adjacency: torch.Tensor, nodes: Nodes, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> Pruned:
    if not (0.0 <= node_threshold <= 1.0 and 0.0 <= edge_threshold <= 1.0):
        raise ValueError("the node and edge thresholds are shares of influence, in 0..1")
    w = logit_weights(nodes)
    node_influence = influence(normalised(adjacency), w)                          # [N]
    keep = node_influence >= cut_at(node_influence, node_threshold)
    keep[nodes.token_start:] = True                                               # tokens and the logit
    inner = adjacency * keep[:, None] * keep[None, :]                             # [N, N]
    norm = normalised(inner)
    edge_scores = norm * (influence(norm, w) + w)[:, None]                        # [N, N]
    edges = edge_scores >= cut_at(edge_scores.flatten(), edge_threshold)
    middle = slice(0, nodes.token_start)                                          # features and errors
    while True:
        before = keep.clone()
        edges &= keep[:, None] & keep[None, :]
        keep[middle] &= edges[:, middle].any(0)                                   # something goes out
        keep[:nodes.n_features] &= edges[:nodes.n_features].any(1)                # something comes in
        if torch.equal(keep, before):
            break
    ranked, order = node_influence.sort(descending=True)
    cumulative = torch.empty_like(node_influence)
    cumulative[order] = ranked.cumsum(0) / ranked.sum().clamp_min(1e-30)
    return Pruned(keep, edges & keep[:, None] & keep[None, :], node_influence, cumulative)


def scores(adjacency: torch.Tensor, nodes: Nodes) -> tuple[float, float]:
    """(replacement score, completeness score) of the whole graph."""
    w = logit_weights(nodes)
    norm = normalised(adjacency)
    reach = influence(norm, w)                                                    # [N]
    errors = slice(nodes.error_start, nodes.token_start)
    tokens = reach[nodes.token_start:nodes.logit].sum()
    replacement = tokens / (tokens + reach[errors].sum()).clamp_min(1e-30)
    not_error = 1 - norm[:, errors].sum(1)                                        # [N]
    weight = reach + w
    completeness = (not_error * weight).sum() / weight.sum()
    return float(replacement), float(completeness)


def position_influence(reach: torch.Tensor, nodes: Nodes) -> torch.Tensor:
    """The influence reaching each input position of the concatenated source + prefix: its token node and
    its error nodes (the graph's inputs there). [S + T]"""
    per = reach[nodes.token_start:nodes.logit].clone()                            # [S + T]
    ctx = nodes.ctx(nodes.error_site, nodes.error_pos)                            # [E]
    return per.index_add(0, ctx, reach[nodes.error_start:nodes.token_start])
