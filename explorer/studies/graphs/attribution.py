"""An attribution graph's edges: each node's direct linear effect on each feature's pre-activation and on
the explained logit, through the replacement model (replacement.py), read off batched backward passes.

The replacement model is affine in its nodes, so a target (a feature's pre-activation x . W_enc[:, f] at
its FFN's input, or the logit hidden[K] . w) is

    target = bias + sum over source nodes s of  edge(s -> target)
    edge(s -> target) = value(s) x d target / d value(s)

where the derivative is taken with every other node held (a feature's activation is a node, not a function
of its input), so the edge is the direct effect of s, through residual sums, frozen norms, frozen
attention (the encoder's self-attention, the decoder's masked self-attention and cross-attention, the
route from a source word to an output word) and the transcoders' skip maps, but never through another
node. A feature node's value is its activation, an error node's and a token node's their vector (the
derivative a vector too, and the edge their dot product). This is circuit-tracer's adjacency matrix
(Ameisen et al. 2025), its rows for feature and logit targets.

Batching as circuit-tracer batches: B targets at a time, one replacement pass on B copies of the node
values, each row's objective its own target, one torch.autograd.grad (only the nodes' gradients, none of
the model's parameters'); the pass itself is made once and kept for every batch's backward pass (an
encoder feature's backward pass walks the encoder's part of it only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from explorer.studies.common.gradients import rows_per_batch
from explorer.studies.graphs.nodes import Nodes, nodes_of
from explorer.studies.graphs.replacement import STACKS, Reads, Replacement, Sources


@dataclass(frozen=True)
class Graph:
    """A whole (unpruned) attribution graph of one output position."""
    rep: Replacement
    nodes: Nodes
    adjacency: torch.Tensor          # [N, N] float32: adjacency[target, source] = edge weight
    bias: torch.Tensor               # [N] each target's value with every node at 0 (0 for non-targets)
    value: torch.Tensor              # [N] each target's value on the sentence (0 for non-targets)


def targets_of(nodes: Nodes) -> torch.Tensor:
    """The rows to compute: every feature node (in node order, encoder first), then the logit node."""
    return torch.cat([torch.arange(nodes.n_features), torch.tensor([nodes.logit])])


def target_values(rep: Replacement, nodes: Nodes, reads: Reads, rows: torch.Tensor) -> torch.Tensor:
    """Each batch row b's target rows[b] read from the replacement pass (row b of its batch): a feature's
    pre-activation without its bias b_enc, or the logit without the logits' bias. [B]"""
    out = next(iter(reads.ffn_in.values())).new_zeros(len(rows))                         # [B]
    is_feature = rows < nodes.n_features
    fb = is_feature.nonzero(as_tuple=True)[0]                                             # batch rows of features
    node = rows[fb]
    site_of = nodes.feature_site[node]
    for i, site in enumerate(nodes.sites):
        b, nd = fb[site_of == i], node[site_of == i]
        if len(b):
            x = reads.ffn_in[site][b, nodes.feature_pos[nd]]                              # [n, d]
            w = rep.transcoders[site].W_enc[:, nodes.feature_id[nd]].T                    # [n, d]
            out = out.index_put((b,), (x * w).sum(-1))
    lb = (~is_feature).nonzero(as_tuple=True)[0]
    if len(lb):
        w, _ = rep.logit_direction()
        out = out.index_put((lb,), reads.hidden[lb, rep.step.position] @ w)
    return out


def edge_rows(rep: Replacement, nodes: Nodes, sources: Sources, grads: list[torch.Tensor | None]) -> torch.Tensor:
    """[B, N] edges into each batch row's target: value x gradient for every node, in node order."""
    leaves = sources.leaves()
    grads = [torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, grads)]
    g = dict(zip(map(id, leaves), grads))
    feat = [g[id(sources.acts[s])] * sources.acts[s].detach() for s in nodes.sites]       # [B, n_s] each
    err = [(g[id(sources.errors[s])] * sources.errors[s].detach()).sum(-1) for s in nodes.sites]   # [B, L_s]
    tok = [(g[id(sources.embeds[s])] * sources.embeds[s].detach()).sum(-1) for s in STACKS]        # [B, L]
    batch = feat[0].shape[0] if feat else tok[0].shape[0]
    logit = tok[0].new_zeros(batch, 1)                                                    # nothing flows out of it
    return torch.cat([*feat, *err, *tok, logit], dim=1).float()                           # [B, N]


def attribute(rep: Replacement, batch: int = 64, tick: Callable[[int], None] | None = None) -> Graph:
    """The whole graph of `rep`: one replacement pass on `batch` copies of the node values, then the rows
    `batch` targets at a time, each a backward pass through that one pass (the replacement is linear with
    its patterns and scales frozen, so the pass is the same for every target: only the seeds differ);
    tick(n) after each batch with the rows done so far (a cancel may raise there). Fewer copies when
    `batch` of them would hold more than the studies' ATTRIBUTION_BYTES (common.gradients.row_bytes)."""
    nodes = nodes_of(rep)
    n = nodes.size
    adjacency = torch.zeros(n, n)                                                         # [N, N]
    targets = targets_of(nodes)
    cfg = rep.model.cfg
    width = min(batch, len(targets), rows_per_batch(cfg, nodes.src_len, nodes.prefix_len))  # within ATTRIBUTION_BYTES
    sources = rep.actual(width, grad=True)
    with torch.enable_grad():
        reads = rep.run(sources)
        for first in range(0, len(targets), width):
            rows = targets[first:first + width]
            objective = target_values(rep, nodes, _first_rows(reads, len(rows)), rows).sum()
            grads = torch.autograd.grad(objective, sources.leaves(), allow_unused=True, retain_graph=True)
            adjacency[rows] = edge_rows(rep, nodes, sources, list(grads))[:len(rows)].cpu()
            if tick is not None:
                tick(first + len(rows))
    bias, value = _bias_and_value(rep, nodes, targets)
    return Graph(rep, nodes, adjacency, bias, value)


def _first_rows(reads: Reads, count: int) -> Reads:
    """The first `count` batch rows of a pass (the last batch of targets may be short)."""
    return Reads({site: x[:count] for site, x in reads.ffn_in.items()}, reads.hidden[:count])


@torch.no_grad()
def _bias_and_value(rep: Replacement, nodes: Nodes, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each target's bias (the replacement with every node at 0, plus the target's own b_enc or the
    logits' bias) and its value on the sentence (a feature's activation, the model's explained logit)."""
    zero = rep.run(rep.zero(1))
    many = Reads({s: x.expand(len(targets), *x.shape[1:]) for s, x in zero.ffn_in.items()},
                 zero.hidden.expand(len(targets), *zero.hidden.shape[1:]))
    bias, value = torch.zeros(nodes.size, dtype=torch.float64), torch.zeros(nodes.size, dtype=torch.float64)
    bias[targets] = target_values(rep, nodes, many, targets).double().cpu()
    b_enc = [rep.transcoders[s].b_enc[nodes.feature_id[nodes.feature_site == i]] for i, s in enumerate(nodes.sites)]
    bias[:nodes.n_features] += torch.cat(b_enc).double().cpu()      # features are in site order
    bias[nodes.logit] += float(rep.logit_direction()[1])
    value[:nodes.n_features] = nodes.feature_act.double()
    value[nodes.logit] = float(rep.explained(rep.model_logits[rep.step.position]))
    return bias, value
