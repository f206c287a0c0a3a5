"""A pruned graph as the JSON circuit-tracer's graph viewer reads (its frontend's graph models, schema
version 1: metadata, qParams, nodes, links), so other tools open our graphs.

circuit-tracer holds one token sequence and numbered layers; an encoder-decoder graph has two sequences
and two stacks. The mapping, said here and in docs/GRAPHS.md:
  - prompt_tokens: the source pieces, then the decoder's prefix pieces (its start id first); a node's
    ctx_idx indexes that list (nodes.py);
  - layer: encoder layer i is "i", decoder layer j is "n_encoder + j", embeddings "E", the logit one past
    the last layer (circuit-tracer's own numbering); `layer_labels` (a key of ours beside the schema's)
    names each ("encoder 0", "decoder 1"), and every node's `clerp` says its stack, layer and token;
  - feature ids are circuit-tracer's pairing of (layer, latent), so features of different layers differ.
Node ids are unique: "{layer}_{latent}_{ctx}" for features, "err_{layer}_{ctx}" for errors (circuit-tracer's
own error ids can meet a feature's), "E_{piece}_{ctx}" for tokens, "{layer}_{piece}_{ctx}" for the logit.
"""
from __future__ import annotations

from explorer.studies.graphs.attribution import Graph
from explorer.studies.graphs.influence import Pruned

SCHEMA_VERSION = 1
FEATURE_TYPES = {"feature": "cross layer transcoder", "error": "mlp reconstruction error", "token": "embedding",
                 "logit": "logit"}          # the viewer's names for the four kinds (a per-layer transcoder included)


def pairing(x: int, y: int) -> int:
    """Cantor's pairing of two non-negative integers: one integer per (layer, latent)."""
    return (x + y) * (x + y + 1) // 2 + y


def layer_labels(graph: Graph) -> dict[str, str]:
    n = graph.nodes
    labels = {"E": "embeddings (source, then prefix)"}
    for i, site in enumerate(n.sites):
        stack, _, index = site.split(".")[:3]
        labels[str(i)] = f"{stack} {index}"
    labels[str(len(n.sites) + 1)] = "logit"
    return labels


def to_json(graph: Graph, pruned: Pruned, pieces: list[str], *, slug: str, prompt: str, node_threshold: float,
            scan: str, transcoder_list: list[str], token_prob: float, target_piece: str) -> dict:
    """The pruned graph as circuit-tracer's graph JSON (plain data; the caller adds its own keys)."""
    n, keep = graph.nodes, pruned.node_mask
    src_len, last = n.src_len, str(len(n.sites) + 1)
    labels = layer_labels(graph)
    cumulative = pruned.cumulative.tolist()
    nodes, ids = [], {}

    def add(index: int, node: dict) -> None:
        node.setdefault("jsNodeId", node["node_id"])
        node.setdefault("influence", cumulative[index])
        ids[index] = node["node_id"]
        nodes.append(node)

    for i in keep[:n.n_features].nonzero(as_tuple=True)[0].tolist():
        layer, latent = int(n.feature_site[i]), int(n.feature_id[i])
        ctx = int(n.ctx(n.feature_site[i:i + 1], n.feature_pos[i:i + 1])[0])
        add(i, {"node_id": f"{layer}_{latent}_{ctx}", "feature": pairing(layer, latent), "layer": str(layer),
                "ctx_idx": ctx, "feature_type": FEATURE_TYPES["feature"], "jsNodeId": f"{layer}_{latent}-0",
                "activation": float(n.feature_act[i]), "clerp": f"{labels[str(layer)]} #{latent} at {pieces[ctx]!r}"})
    for e in keep[n.error_start:n.token_start].nonzero(as_tuple=True)[0].tolist():
        layer = int(n.error_site[e])
        ctx = int(n.ctx(n.error_site[e:e + 1], n.error_pos[e:e + 1])[0])
        add(n.error_start + e, {"node_id": f"err_{layer}_{ctx}", "feature": -1, "layer": str(layer), "ctx_idx": ctx,
                                "feature_type": FEATURE_TYPES["error"],
                                "clerp": f"{labels[str(layer)]} error at {pieces[ctx]!r}"})
    token_ids = [*graph.rep.step.src, *graph.rep.step.prefix]
    for ctx in range(n.n_tokens):
        side = "source" if ctx < src_len else "prefix"
        add(n.token_start + ctx, {"node_id": f"E_{token_ids[ctx]}_{ctx}", "feature": ctx, "layer": "E", "ctx_idx": ctx,
                                  "feature_type": FEATURE_TYPES["token"], "jsNodeId": f"E_{token_ids[ctx]}-{ctx}",
                                  "clerp": f"{side} {pieces[ctx]!r}"})
    step = graph.rep.step
    what = f"logit({target_piece!r})" + ("" if step.foil is None else " - logit(foil)")
    add(n.logit, {"node_id": f"{last}_{step.token}_{n.n_tokens - 1}", "feature": step.token, "layer": last,
                  "ctx_idx": n.n_tokens - 1, "feature_type": FEATURE_TYPES["logit"], "is_target_logit": True,
                  "token_prob": token_prob, "jsNodeId": f"L_{step.token}-{n.n_tokens - 1}",
                  "clerp": f"{what} (p={token_prob:.3f})"})
    targets, sources = pruned.edge_mask.nonzero(as_tuple=True)
    weights = graph.adjacency[targets, sources].tolist()
    links = [{"source": ids[s], "target": ids[t], "weight": w}
             for t, s, w in zip(targets.tolist(), sources.tolist(), weights) if s in ids and t in ids]
    return {"metadata": {"slug": slug, "scan": scan, "transcoder_list": transcoder_list, "prompt_tokens": pieces,
                         "prompt": prompt, "node_threshold": node_threshold, "schema_version": SCHEMA_VERSION},
            "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
            "nodes": nodes, "links": links, "layer_labels": labels}
