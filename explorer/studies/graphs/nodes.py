"""The nodes of an attribution graph, in circuit-tracer's order: feature nodes, error nodes, token nodes,
the logit node. One index runs over all of them, so the adjacency matrix is [N, N] with rows as targets
(what an edge goes into) and columns as sources.

Where each node sits: a layer and a context index. Layers run through both stacks, encoder layers first
(encoder layer i is layer i, decoder layer j is layer n_encoder + j): the order a value can flow in, since
the decoder reads the encoder's last states. Context indices run over the source and the decoder's prefix
concatenated (source position p is p, prefix position t is S + t), the one token sequence circuit-tracer's
graph format holds.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.studies.graphs.replacement import Replacement

GRAPH_BYTES = 1 << 30        # the adjacency matrix [N, N] float32 at most 1 GiB (N up to 16,384)


@dataclass(frozen=True)
class Nodes:
    sites: tuple[str, ...]           # FFN sites, encoder first: a site's index is its layer
    n_encoder: int                   # how many of the sites are the encoder's
    src_len: int                     # S
    prefix_len: int                  # T (the traced output position is T - 1)
    feature_site: torch.Tensor       # [F] index into sites
    feature_pos: torch.Tensor        # [F] position in its stack
    feature_id: torch.Tensor         # [F] latent index in its dictionary
    feature_act: torch.Tensor        # [F] activation
    error_site: torch.Tensor         # [E] index into sites
    error_pos: torch.Tensor          # [E]

    @property
    def n_features(self) -> int:
        return len(self.feature_site)

    @property
    def n_errors(self) -> int:
        return len(self.error_site)

    @property
    def n_tokens(self) -> int:
        return self.src_len + self.prefix_len

    @property
    def size(self) -> int:
        return self.n_features + self.n_errors + self.n_tokens + 1

    @property
    def error_start(self) -> int:
        return self.n_features

    @property
    def token_start(self) -> int:
        return self.n_features + self.n_errors

    @property
    def logit(self) -> int:
        return self.size - 1

    def on_encoder(self, site_index: torch.Tensor) -> torch.Tensor:
        return site_index < self.n_encoder

    def ctx(self, site_index: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Context index in the concatenated source + prefix of nodes at (site, position)."""
        return torch.where(self.on_encoder(site_index), pos, pos + self.src_len)


def nodes_of(rep: Replacement) -> Nodes:
    """The nodes of `rep`'s graph; ValueError when its adjacency matrix would pass GRAPH_BYTES."""
    sites = tuple(rep.sites)
    n_encoder = sum(site.startswith("encoder.") for site in sites)
    src_len, prefix_len = len(rep.step.src), len(rep.step.prefix)
    f_site, f_pos, f_id, f_act, e_site, e_pos = [], [], [], [], [], []
    for i, site in enumerate(sites):
        active = rep.active[site]
        f_site.append(torch.full_like(active.positions, i))
        f_pos.append(active.positions)
        f_id.append(active.features)
        f_act.append(active.values.detach())
        length = src_len if i < n_encoder else prefix_len
        e_site.append(torch.full((length,), i, dtype=torch.long))
        e_pos.append(torch.arange(length))
    n = sum(len(t) for t in f_site) + sum(len(t) for t in e_site) + src_len + prefix_len + 1
    if n * n * 4 > GRAPH_BYTES:
        raise ValueError(f"a graph of {n:,} nodes needs a {n:,} x {n:,} matrix, more than {GRAPH_BYTES:,} bytes: "
                         "choose a shorter sentence or an earlier position")
    cat = torch.cat
    return Nodes(sites, n_encoder, src_len, prefix_len, cat(f_site).cpu(), cat(f_pos).cpu(), cat(f_id).cpu(),
                 cat(f_act).cpu(), cat(e_site), cat(e_pos))
