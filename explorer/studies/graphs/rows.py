"""A graph's JSON (job.run_graph's, circuit-tracer's format with this project's keys) read back as plain
rows, one per kept node, for a page's figure, its table and its links: where each node sits (stack, layer,
position in its stack, piece), what it is (a feature's latent, an error, a token, the logit) and how much of
the logit's influence reaches it.

The JSON names a node's place by circuit-tracer's single layer number and a context index over the source
and the prefix concatenated (export.py); a page speaks of the encoder's or the decoder's layer and of a
position in the source or in the output, so the translation back is written here once.
"""
from __future__ import annotations

KINDS = {"cross layer transcoder": "feature", "mlp reconstruction error": "error", "embedding": "token",
         "logit": "logit"}           # export.FEATURE_TYPES inverted


def node_rows(graph: dict) -> list[dict]:
    """One row per kept node, in the JSON's order: id, kind, stack ("encoder", "decoder", or "" for a token
    and the logit), layer (0-based in its stack; None for tokens and the logit), site (its FFN's name),
    side ("source" or "prefix"), position (0-based in its side), ctx, piece, latent (features), activation
    (features), influence (the share of the logit's influence reaching it)."""
    sites = graph["metadata"]["transcoder_list"]
    pieces = graph["metadata"]["prompt_tokens"]
    src_len = graph["counts"]["source"]
    influence = graph.get("node_influence") or [0.0] * len(graph["nodes"])
    rows = []
    for node, reach in zip(graph["nodes"], influence):
        kind, ctx = KINDS.get(node["feature_type"], "feature"), int(node["ctx_idx"])
        side = "source" if ctx < src_len else "prefix"
        row = {"id": node["node_id"], "kind": kind, "stack": "", "layer": None, "site": "", "side": side,
               "position": ctx if side == "source" else ctx - src_len, "ctx": ctx, "piece": pieces[ctx],
               "latent": None, "activation": None, "influence": float(reach)}
        if kind in ("feature", "error"):
            index = int(node["layer"])
            site = sites[index]
            row.update(site=site, stack=site.split(".")[0], layer=int(site.split(".")[2]))
            if kind == "feature":
                row.update(latent=int(node["node_id"].split("_")[1]), activation=float(node["activation"]))
        rows.append(row)
    return rows


def layer_count(graph: dict) -> int:
    """How many FFN sites the graph's model has (both stacks): the rows between the embeddings and the logit."""
    return len(graph["metadata"]["transcoder_list"])


def source_words(graph: dict) -> list[str]:
    """The source pieces (the first counts.source prompt tokens)."""
    return graph["metadata"]["prompt_tokens"][:graph["counts"]["source"]]
