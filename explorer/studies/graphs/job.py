"""One attribution graph as a study: the question (step.py), the replacement model (replacement.py), its
edges (attribution.py), pruning and scores (influence.py), circuit-tracer's JSON (export.py), and the
figures that say whether to trust it.

Exactness, two ways, both in the result:
  - replacement_logit_error: the replacement model run on the sentence's own node values against the
    model's own logits at every position up to K, the largest difference over them and the vocabulary
    (float rounding only: the error nodes make the replacement exact);
  - logit_error: the explained logit against its bias plus the sum of the edges into it (the graph's
    linearity: the edges are derivatives, and they add up only if nothing non-linear is left).
Where the logit comes from: top_source_position is the source position whose inputs (its token node and
its error nodes) receive the largest share of the logit's influence (influence.position_influence).

The costly part (attributed: one backward pass per `batch` targets) and the cheap one (described: pruning,
scores, the JSON) are apart, so GRAPH_THRESHOLDS, the app's Graphs page study, prunes one graph at each of
NODE_THRESHOLDS for its slider; each pruning equals run_graph's at that threshold
(tests/unit/test_graphs_thresholds.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch

from explorer.evaluation.arguments import check_ranges
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.graphs import export, influence
from explorer.studies.graphs.attribution import Graph, attribute
from explorer.studies.graphs.nodes import nodes_of
from explorer.studies.graphs.replacement import Replacement
from explorer.studies.graphs.step import Question, question

RANGES = {"position": (0, 4096), "batch": (1, 1024), "node_threshold": (0.0, 1.0), "edge_threshold": (0.0, 1.0)}
RESULT_KEYS = ("settings", "metadata", "qParams", "nodes", "links", "logit_error", "replacement_logit_error",
               "top_source_position", "scores")
STAGES = ("edges",)
NODE_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)   # the app's slider: each a pruning of one graph
THRESHOLDS_KEYS = ("settings", "graphs")


@dataclass(frozen=True)
class GraphSettings:
    position: int = 0                 # K: the output explained (0-based; the output's length is its EOS)
    node_threshold: float = 0.8       # the nodes kept hold this share of the influence on the logit
    edge_threshold: float = 0.98      # the edges kept hold this share of the influence among kept nodes
    batch: int = 64                   # targets per backward pass

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)


def run_graph(model, tokenizer, text: str, transcoders: dict, settings: GraphSettings = GraphSettings(), *,
              target: str | None = None, foil: str | None = None, scan: str = "",
              context: RunContext = RunContext()) -> dict:
    """The pruned graph of output `settings.position` of `text` (forced `target`, or the model's greedy
    output), its logit (minus the foil's) explained through `transcoders` {FFN site: transcoder}."""
    made = attributed(model, tokenizer, text, transcoders, settings, target=target, foil=foil, context=context)
    return described(made, settings, scan=scan, context=context)


def run_graph_thresholds(model, tokenizer, text: str, transcoders: dict, settings: GraphSettings = GraphSettings(), *,
                         thresholds: tuple[float, ...] = NODE_THRESHOLDS, target: str | None = None,
                         foil: str | None = None, scan: str = "", context: RunContext = RunContext()) -> dict:
    """run_graph's result at each node threshold in `thresholds`, the edges computed once: the app's threshold
    slider re-prunes without a backward pass, and keeps only the pruned graphs (a bible-es-en graph's whole
    adjacency is ~6,700 x 6,700 floats, 180 MB; its pruned graphs a few hundred kB)."""
    made = attributed(model, tokenizer, text, transcoders, settings, target=target, foil=foil, context=context)
    graphs = [described(made, replace(settings, node_threshold=float(t)), scan=scan, context=context)
              for t in thresholds]
    return {"settings": {**context.checkpoint(), **asdict(settings), "text": text, "target": target, "foil": foil,
                         "thresholds": [float(t) for t in thresholds]}, "graphs": graphs}


@dataclass(frozen=True)
class Attributed:
    """A whole graph of one question with what its descriptions share: pruning at another threshold needs
    no new backward pass."""
    asked: Question
    graph: Graph
    text: str
    target: str | None
    foil: str | None
    probability: float                # of the explained token under the model
    replacement_logit_error: float    # the replacement on its own node values against the model's logits


def attributed(model, tokenizer, text: str, transcoders: dict, settings: GraphSettings = GraphSettings(), *,
               target: str | None = None, foil: str | None = None, context: RunContext = RunContext()) -> Attributed:
    """The whole (unpruned) graph of the question: the costly part, one backward pass per `settings.batch`
    targets."""
    asked = question(model, tokenizer, text, settings.position, target, foil)
    rep = Replacement(model, transcoders, asked.step)
    ticker = context.ticker()
    edges_done = ticker.stage("edges", nodes_of(rep).n_features + 1)      # every feature's row and the logit's
    graph = attribute(rep, settings.batch, lambda done: ticker.check(edges_done, done))
    with torch.no_grad():
        own = rep.logits(rep.run(rep.actual(1)))[0]                                       # [T, V]
    model_logits = rep.model_logits[asked.step.position]                                  # [V]
    probability = float(torch.softmax(model_logits.double(), -1)[asked.step.token])
    return Attributed(asked, graph, text, target, foil, probability, float((own - rep.model_logits).abs().max()))


def described(made: Attributed, settings: GraphSettings, *, scan: str = "", context: RunContext = RunContext()) -> dict:
    """The graph pruned at `settings`' thresholds, as run_graph returns it (circuit-tracer's JSON and ours)."""
    asked, graph = made.asked, made.graph
    nodes = graph.nodes
    pruned = influence.prune(graph.adjacency, nodes, settings.node_threshold, settings.edge_threshold)
    replacement, completeness = influence.scores(graph.adjacency, nodes)
    at = influence.position_influence(pruned.influence, nodes)                            # [S + T]
    logit, bias = float(graph.value[nodes.logit]), float(graph.bias[nodes.logit])
    edges = float(graph.adjacency[nodes.logit].double().sum())
    sites = list(nodes.sites)
    data = export.to_json(graph, pruned, asked.pieces, slug=_slug(context, settings.position), prompt=made.text,
                          node_threshold=settings.node_threshold, scan=scan or context.meta.get("name", ""),
                          transcoder_list=sites, token_prob=made.probability, target_piece=asked.target_piece)
    kept = torch.cat([pruned.node_mask[:nodes.token_start].nonzero(as_tuple=True)[0],
                      torch.arange(nodes.token_start, nodes.size)])                       # export's node order
    return {
        "settings": {**context.checkpoint(), **asdict(settings), "text": made.text, "target": made.target,
                     "foil": made.foil},
        **data,
        "explained": {"token": asked.step.token, "piece": asked.target_piece, "foil": asked.step.foil,
                      "foil_note": asked.foil_note, "probability": made.probability, "logit": logit,
                      "bias": bias, "edges": edges,
                      "edges_abs": float(graph.adjacency[nodes.logit].double().abs().sum())},
        "logit_error": abs(bias + edges - logit),
        "replacement_logit_error": made.replacement_logit_error,
        "top_source_position": int(at[:nodes.src_len].argmax()),
        "position_influence": [float(v) for v in at],
        "node_influence": [float(v) for v in pruned.influence[kept]],       # each listed node's, in "nodes" order
        "scores": {"replacement": replacement, "completeness": completeness},
        "counts": {"features": nodes.n_features, "errors": nodes.n_errors, "tokens": nodes.n_tokens,
                   "source": nodes.src_len, "kept_nodes": len(data["nodes"]), "kept_links": len(data["links"])},
    }


def _slug(context: RunContext, position: int) -> str:
    return f"{context.meta.get('name', 'model') or 'model'}-position-{position}"


def report(result: dict) -> str:
    e, s, c = result["explained"], result["scores"], result["counts"]
    pieces = result["metadata"]["prompt_tokens"]
    top = result["top_source_position"]
    what = f"logit of {e['piece']!r}" + (" minus the foil's" if e["foil"] is not None else "")
    return "\n".join([
        f"explained: {what} at position {result['settings']['position']}: {e['logit']:.4f} "
        f"(p = {e['probability']:.3f}); bias {e['bias']:.4f} + edges {e['edges']:.4f}",
        f"exactness: |bias + edges - logit| = {result['logit_error']:.2e}; replacement vs model logits at "
        f"positions 0..K, largest difference {result['replacement_logit_error']:.2e}",
        f"nodes: {c['features']} features, {c['errors']} errors, {c['tokens']} tokens; kept {c['kept_nodes']} "
        f"nodes, {c['kept_links']} links",
        f"replacement score {s['replacement']:.3f}, completeness {s['completeness']:.3f}",
        f"most influential source position: {top} ({pieces[top]!r})"] + ([e["foil_note"]] if e["foil_note"] else []))


GRAPH = Study("graph", run_graph, RESULT_KEYS, report, STAGES)
GRAPH_THRESHOLDS = Study("graph-thresholds", run_graph_thresholds, THRESHOLDS_KEYS,
                         lambda result: "\n\n".join(report(g) for g in result["graphs"]), STAGES)
