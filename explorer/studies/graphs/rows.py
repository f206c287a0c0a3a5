"""A graph's JSON (job.run_graph's, circuit-tracer's format with this project's keys) read back as plain
rows, one per kept node, for a page's figure, its table and its links: where each node sits (stack, layer,
position in its stack, piece), what it is (a feature's latent, an error, a token, the logit) and how much of
the logit's influence reaches it.

The JSON names a node's place by circuit-tracer's single layer number and a context index over the source
and the prefix concatenated (export.py); a page speaks of the encoder's or the decoder's layer and of a
position in the source or in the output, so the translation back is written here once.

A graph read back from a file may be damaged inside (its keys present, a value wrong): check_graph says the
first field that is not what the job writes, as one ValueError, before a page reads it; node_rows and
source_words check what they read, so that a damaged node is refused, never shown at a wrong place (a
ctx_idx of -1 read as the last piece, a layer of -1 as the last site) or dropped (a short node_influence).
"""
from __future__ import annotations

import math
import re

KINDS = {"cross layer transcoder": "feature", "mlp reconstruction error": "error", "embedding": "token",
         "logit": "logit"}           # export.FEATURE_TYPES inverted
SITE = re.compile(r"(encoder|decoder)\.layers\.(\d{1,6})\.\w+")      # an FFN site's name (features.sites)
FEATURE_ID = re.compile(r"\d{1,6}_(\d{1,9})_\d{1,6}")                  # export: layer_latent_ctx
COUNTS = ("features", "errors", "tokens", "kept_nodes", "kept_links")  # beside "source"
EXPLAINED = ("probability", "logit", "bias", "edges")


def _whole(value: object) -> bool:
    return type(value) is int and value >= 0


def _number(value: object) -> bool:
    """A finite number a page can format and add: JSON's 1e400 reads as infinity, 10**400 as an int no float
    holds (an OverflowError in the page's formatting), NaN as a number that compares false with everything."""
    if type(value) is int:
        return abs(value) <= 2 ** 53
    return type(value) is float and math.isfinite(value)


def _layer(value: object) -> int | None:
    """A node's layer as export writes it ("3", or 3 in files of other tools), else None."""
    if type(value) is int:
        return value if value >= 0 else None
    return int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]{1,6}", value) else None


def _need(ok: object, field: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{field}: {what}")


def _check_words(graph: dict) -> tuple[list, list]:
    """The graph's sites and prompt pieces, with counts.source within the pieces (source_words' fields)."""
    _need(isinstance(graph, dict), "graph", "not an object")
    meta, counts = graph.get("metadata"), graph.get("counts")
    _need(isinstance(meta, dict), "metadata", "missing or not an object")
    sites, pieces = meta.get("transcoder_list"), meta.get("prompt_tokens")
    _need(isinstance(sites, list) and all(isinstance(s, str) and SITE.fullmatch(s) for s in sites),
          "metadata.transcoder_list", "not a list of FFN sites")
    _need(isinstance(pieces, list) and pieces and all(isinstance(t, str) for t in pieces),
          "metadata.prompt_tokens", "not a list of pieces")
    _need(isinstance(counts, dict) and _whole(counts.get("source")) and counts["source"] <= len(pieces),
          "counts.source", f"not a count of source pieces among the {len(pieces)} prompt tokens")
    return sites, pieces


def _check_nodes(graph: dict) -> None:
    """What node_rows reads: every node placed within the prompt and the sites, one influence per node."""
    sites, pieces = _check_words(graph)
    nodes, influence = graph.get("nodes"), graph.get("node_influence")
    _need(isinstance(nodes, list), "nodes", "not a list")
    _need(influence is None or (isinstance(influence, list) and len(influence) == len(nodes)
                                and all(_number(v) for v in influence)),
          "node_influence", f"not {len(nodes)} numbers, one per node")
    for i, node in enumerate(nodes):
        at = f"nodes[{i}]"
        _need(isinstance(node, dict) and isinstance(node.get("node_id"), str)
              and isinstance(node.get("feature_type"), str), at, "not a node with an id and a type")
        ctx = node.get("ctx_idx")
        _need(_whole(ctx) and ctx < len(pieces), f"{at}.ctx_idx", f"{ctx!r}, not a position among the "
              f"{len(pieces)} prompt tokens")
        kind = KINDS.get(node["feature_type"], "feature")
        if kind in ("feature", "error"):
            layer = _layer(node.get("layer"))
            _need(layer is not None and layer < len(sites), f"{at}.layer",
                  f"{node.get('layer')!r}, not one of the {len(sites)} sites")
        if kind == "feature":
            _need(FEATURE_ID.fullmatch(node["node_id"]), f"{at}.node_id", f"{node['node_id']!r}, not layer_latent_ctx")
            _need(_number(node.get("activation")), f"{at}.activation", "not a number")


def check_graph(graph: dict) -> None:
    """ValueError naming the first field a page reads that is not what job.described writes: the nodes
    (node_rows), the counts, the explained logit, the scores, the links, the position influence."""
    _check_nodes(graph)
    counts, explained, scores = graph["counts"], graph.get("explained"), graph.get("scores")
    for key in COUNTS:
        _need(_whole(counts.get(key)), f"counts.{key}", "not a count")
    _need(isinstance(explained, dict) and isinstance(explained.get("piece"), str)
          and all(_number(explained.get(k)) for k in EXPLAINED), "explained", "not the explained logit's numbers")
    _need(explained.get("foil") is None or _whole(explained["foil"]), "explained.foil", "not a token id")
    _need(explained.get("foil_note") is None or isinstance(explained["foil_note"], str), "explained.foil_note",
          "not text")
    _need(isinstance(scores, dict) and all(_number(scores.get(k)) for k in ("replacement", "completeness")),
          "scores", "not the replacement and completeness scores")
    for key in ("logit_error", "replacement_logit_error"):
        _need(_number(graph.get(key)), key, "not a number")
    settings, links, at = graph.get("settings"), graph.get("links"), graph.get("position_influence")
    _need(isinstance(settings, dict) and _whole(settings.get("position")), "settings.position", "not a position")
    _need(settings.get("foil") is None or isinstance(settings["foil"], str), "settings.foil", "not a word")
    _need(isinstance(links, list) and all(isinstance(l, dict) and isinstance(l.get("source"), str)
                                          and isinstance(l.get("target"), str) and _number(l.get("weight"))
                                          for l in links), "links", "not a list of {source, target, weight}")
    _need(isinstance(at, list) and at and all(_number(v) for v in at), "position_influence", "not a list of numbers")
    top = graph.get("top_source_position")
    _need(_whole(top) and top < min(len(at), counts["source"]), "top_source_position",
          f"{top!r}, not a source position")


def node_rows(graph: dict) -> list[dict]:
    """One row per kept node, in the JSON's order: id, kind, stack ("encoder", "decoder", or "" for a token
    and the logit), layer (0-based in its stack; None for tokens and the logit), site (its FFN's name),
    side ("source" or "prefix"), position (0-based in its side), ctx, piece, latent (features), activation
    (features), influence (the share of the logit's influence reaching it). ValueError naming the field
    when a node lies outside the prompt or the sites (_check_nodes)."""
    _check_nodes(graph)
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
            site = sites[_layer(node["layer"])]
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
    _check_words(graph)
    return graph["metadata"]["prompt_tokens"][:graph["counts"]["source"]]
