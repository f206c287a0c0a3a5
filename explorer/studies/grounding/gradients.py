"""Each pair's gradient, projected small enough to keep for every training pair: what training-data
attribution compares (influence.py).

Which gradient: of the pair's summed negative log-likelihood of its target tokens (no label smoothing:
the probability the model gives, not the trainer's smoothed objective), or of chosen target tokens only
(one output word's pieces), with respect to the weights of the decoder's linear maps that run as modules
(self-attention's output map; cross-attention's query and output maps; both feed-forward maps: the
decoder writes the output, and cross-attention is where the source reaches it). Attention's fused
query-key-value products, the encoder, embeddings, biases and LayerNorms are left out: the encoder
runs without gradients, so a pair costs about half a training step.

How: a linear map y = x W^T + b gives a pair the weight gradient sum_t delta_t x_t^T (delta_t = dL/dy_t at
target position t). Projected with fixed random Gaussian matrices P [K, out] and Q [K, in] it is
sum_t (P delta_t)(Q x_t)^T: K x K numbers made from the two small projections, never the out x in
gradient (the factorised projection of LoGra: Choe et al. 2024, "What is Your Data Worth to GPT?").
One padded batch gives every pair's at once: a pair's loss reads only its own row, and padded target
positions carry delta = 0. The layers' K x K blocks are projected once more to DIM numbers (Gaussian,
scaled so inner products are kept in expectation: Johnson-Lindenstrauss). `exact=True` skips both
projections and returns the full gradients, which the tests compare with autograd and with dattri.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

K = 16                 # each linear map's input and output projected to K numbers: K*K per layer
DIM = 512              # the features kept per pair
SEED = 20261128        # the projections' seed: a store and its queries must use the same matrices


def watched_linears(model) -> list[tuple[str, nn.Linear]]:
    """The decoder's linear maps that run as modules (forward hooks fire on them), in module order."""
    return [(f"decoder.{name}", m) for name, m in model.decoder.named_modules()
            if isinstance(m, nn.Linear) and not _fused(name)]


def _fused(name: str) -> bool:
    """The attention maps the model multiplies as one fused product (layers.MultiHeadAttention._product):
    their module never runs, so no hook sees them. Cross-attention's query map runs alone."""
    last = name.rsplit(".", 1)[-1]
    return last in ("w_k", "w_v") or (last == "w_q" and ".self_attn." in f".{name}")


@dataclass(frozen=True)
class Projection:
    """The fixed random matrices for one model shape: per layer (P [K, out], Q [K, in]), then [F, DIM]."""
    layers: tuple[str, ...]
    per_layer: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    final: torch.Tensor                                                  # [len(layers) * K * K, DIM]

    @classmethod
    def for_model(cls, model) -> "Projection":
        gen = torch.Generator().manual_seed(SEED)
        named = watched_linears(model)
        per_layer = tuple((torch.randn(K, m.out_features, generator=gen) / K ** 0.5,           # [K, out]
                           torch.randn(K, m.in_features, generator=gen) / K ** 0.5) for _, m in named)  # [K, in]
        final = torch.randn(len(named) * K * K, DIM, generator=gen) / DIM ** 0.5               # [F, DIM]
        return cls(tuple(n for n, _ in named), per_layer, final)


def features(model, src: torch.Tensor, tgt: torch.Tensor, weights: torch.Tensor | None = None,
             projection: Projection | None = None, exact: bool = False) -> torch.Tensor:
    """Per-pair gradient features [B, DIM] (or the full gradients [B, sum out*in] when `exact`).

    src [B, S] (ids + EOS, padded), tgt [B, T+1] (BOS + ids + EOS, padded); `weights` [B, T] says which
    target positions' negative log-likelihood counts (default: every real one)."""
    named = watched_linears(model)
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = [m.register_forward_hook(lambda mod, args, out, name=name: seen.__setitem__(name, (args[0], out)))
               for name, m in named]
    pad = model.cfg.pad_id
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]                                # [B, T]
    mask = (tgt_out != pad).to(torch.float32) if weights is None else weights.to(torch.float32)  # [B, T]
    try:
        with torch.no_grad():
            memory, src_mask = model.encode(src)                            # [B, S, d]
        with torch.enable_grad():
            log_probs = model.generator(model.decode(tgt_in, memory, src_mask))          # [B, T, V]
            nll = -log_probs.gather(2, tgt_out.unsqueeze(2)).squeeze(2)                   # [B, T]
            outputs = [seen[name][1] for name, _ in named]
            deltas = torch.autograd.grad((nll * mask).sum(), outputs)       # each [B, T, out]
    finally:
        for h in handles:
            h.remove()
    blocks = []
    for k, (name, _) in enumerate(named):
        x, delta = seen[name][0].detach(), deltas[k]                        # [B, T, in], [B, T, out]
        if exact:
            blocks.append(torch.einsum("bto,bti->boi", delta, x).flatten(1))            # [B, out*in]
        else:
            p, q = projection.per_layer[k]
            blocks.append(torch.einsum("btk,btj->bkj", delta @ p.T, x @ q.T).flatten(1))  # [B, K*K]
    joined = torch.cat(blocks, dim=1)                                       # [B, F]
    return joined if exact else joined @ projection.final                  # [B, DIM]
