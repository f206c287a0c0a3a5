"""Interventions on a graph's feature nodes: remove a node (its activation set to 0) or clamp it to a value,
and compare what the model then does with what the graph predicts.

Two answers to "what if this node were different?":

  - the model's: the model run again, attention, norms and every later feature live, with the feature's
    share of its dictionary's reconstruction moved at that position (features.steering.clamped: the FFN
    keeps its own output plus (value - z) W_dec[f], the dictionary's error kept), so every effect the
    change has downstream is in it;
  - the graph's: the replacement model (replacement.py) with that node's value changed and every other
    node held (attention patterns, norm scales, other features' activations and errors at the sentence's
    values): the sum of the node's edges into the logit along the linear paths, scaled by how far it moved.

Where the two agree, the graph's edges say what the model does; where the model's change is larger, the
effect runs through what the graph holds fixed (later features switching, attention moving). Ameisen et
al. 2025 ("Circuit Tracing", transformer-circuits.pub) check their graphs the same way: an intervention's
effect on the model against the graph's prediction.

`causal_check` is the question "do the nodes the graph ranks first matter more than any others?":
log p(output K) after removing the k feature nodes of largest influence, against removing k active
features drawn at random.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Sequence

import torch

from explorer.studies.features.steering import clamped, positions_mask
from explorer.studies.graphs import influence
from explorer.studies.graphs.replacement import Replacement, Step


@dataclass(frozen=True)
class NodeChange:
    """One feature node set to `value` (0 removes it). `position` indexes the source for encoder sites and
    the decoder's prefix (the start id is 0) for decoder sites."""
    site: str
    position: int
    feature: int
    value: float = 0.0


@dataclass(frozen=True)
class Intervention:
    changes: tuple[NodeChange, ...]
    logit_before: float        # the explained logit (minus the foil's) on the model as it is
    logit_model: float         # the same with the changes, the model run again (attention live)
    logit_graph: float         # the same as the graph predicts it (every other node held)
    logprob_before: float      # log p(output K), the model as it is
    logprob_model: float       # log p(output K) with the changes

    @property
    def model_change(self) -> float:
        return self.logit_model - self.logit_before

    @property
    def graph_change(self) -> float:
        return self.logit_graph - self.logit_before


def _node_index(rep: Replacement, change: NodeChange) -> int:
    """The change's index among its site's active features; ValueError when it is not a node."""
    if change.site not in rep.active:
        raise ValueError(f"{change.site!r} is not one of the model's FFN sites ({', '.join(rep.sites)})")
    active = rep.active[change.site]
    hit = ((active.positions == change.position) & (active.features == change.feature)).nonzero()
    if not len(hit):
        raise ValueError(f"feature {change.feature} of {change.site} does not fire at position {change.position}: "
                         "the graph has no node for it")
    return int(hit[0, 0])


@torch.no_grad()
def _model_pass(rep: Replacement, transcoders: dict, changes: Sequence[NodeChange]) -> torch.Tensor:
    """The model's logits at position K with every change in place. [V]"""
    lengths = {"encoder": len(rep.step.src), "decoder": len(rep.step.prefix)}
    with ExitStack() as stack:
        for c in changes:
            mask = positions_mask(lengths[c.site.split(".")[0]], [c.position])            # [1, L]
            stack.enter_context(clamped(rep.model, c.site, transcoders[c.site], c.feature, c.value, mask))
        return rep.model.logits(rep.src_ids, rep.prefix_ids)[0, rep.step.position]      # [V]


def intervene(model, transcoders: dict, step: Step, changes: Sequence[NodeChange],
              rep: Replacement | None = None) -> Intervention:
    """Each change's node set to its value, the model and the graph asked what the explained logit becomes.
    `rep`: the graph's replacement model when the caller has it (built from `step` otherwise)."""
    rep = rep if rep is not None else Replacement(model, transcoders, step)
    changes = tuple(changes)
    if not changes:
        raise ValueError("name at least one feature node to change")
    indices = [_node_index(rep, c) for c in changes]
    with torch.no_grad():
        sources = rep.actual(1)
        for c, i in zip(changes, indices):
            sources.acts[c.site][0, i] = c.value
        graph = float(rep.explained(rep.logits(rep.run(sources))[0, step.position]))
    before = rep.model_logits[step.position]                                              # [V]
    after = _model_pass(rep, transcoders, changes)                                        # [V]
    return Intervention(changes, float(rep.explained(before)), float(rep.explained(after)), graph,
                        _logprob(before, step.token), _logprob(after, step.token))


def _logprob(logits: torch.Tensor, token: int) -> float:
    return float(torch.log_softmax(logits.double(), -1)[token])


@dataclass(frozen=True)
class CausalCheck:
    """log p(output K) lost by removing the top-k feature nodes by influence, and k random active ones."""
    drop_top: float
    drop_random: float
    top: tuple[NodeChange, ...]
    random: tuple[NodeChange, ...]

    @property
    def holds(self) -> bool:
        """The top nodes' removal lowers log p, by at least twice what the random nodes' removal does."""
        return self.drop_top > 0 and self.drop_top >= 2 * self.drop_random


def causal_check(model, transcoders: dict, graph, k: int = 10, generator: torch.Generator | None = None) -> CausalCheck:
    """`graph`: an attribution.Graph. Its feature nodes ranked by influence on the logit (influence.py), the
    k first removed in the model, then k drawn uniformly from all its feature nodes (`generator`)."""
    nodes, rep = graph.nodes, graph.rep
    n = nodes.n_features
    if n == 0:
        raise ValueError("the graph has no feature node")
    reach = influence.influence(influence.normalised(graph.adjacency), influence.logit_weights(nodes))[:n]   # [F]
    k = min(k, n)
    top = reach.argsort(descending=True)[:k]
    drawn = torch.randperm(n, generator=generator)[:k]

    def removal(picked: torch.Tensor) -> tuple[NodeChange, ...]:
        return tuple(NodeChange(nodes.sites[int(nodes.feature_site[i])], int(nodes.feature_pos[i]),
                                int(nodes.feature_id[i]), 0.0) for i in picked)

    top_changes, random_changes = removal(top), removal(drawn)
    top_run = intervene(model, transcoders, rep.step, top_changes, rep)
    random_run = intervene(model, transcoders, rep.step, random_changes, rep)
    return CausalCheck(top_run.logprob_before - top_run.logprob_model,
                       random_run.logprob_before - random_run.logprob_model, top_changes, random_changes)
