"""Every attention block of one teacher-forced pass, as decomposition.AttentionBlocks.

One forward of the model itself, under torch.no_grad, with the project's hooks (inspection.hooks.
intervene, each edit handing its tensor back unchanged, so the values keep the model's dtype: a float64
copy of a model gives float64 numbers throughout, which the exactness tests need) recording what the
decomposition reads at each block: the residual stream entering it, the attention weights, the attention
output. What the hooks do not see is rebuilt with model/functional.py's own formulas, never re-derived:
the stream entering a decoder layer's cross-attention is functional.residual(stream, attention output)
of its self-attention block; a pre-LN block's values are read from functional.layer_norm of its input.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from explorer.studies.contributions.decomposition import AttentionBlock
from explorer.decoding.core import special_ids
from explorer.inspection.hooks import intervene
from explorer.model import functional as fn
from explorer.runtime.modes import eval_mode

DTYPE = torch.float64                  # what the decomposition computes in, whatever the model's dtype


@dataclass(frozen=True)
class ForcedPass:
    """One pair's blocks and the log-probability the model gave each forced output token."""

    encoder: list[AttentionBlock]        # per encoder layer, self-attention
    decoder_self: list[AttentionBlock]   # per decoder layer
    cross: list[AttentionBlock]          # per decoder layer
    token_logprobs: list[float]          # log p(out_ids[i] | source, out_ids[:i])


def _names(stack: str, n_layers: int, points: Sequence[str]) -> list[str]:
    names = [f"{stack}.embed.out"] + [f"{stack}.layers.{l}.resid_post" for l in range(n_layers)]
    return names + [f"{stack}.layers.{l}.{point}" for l in range(n_layers) for point in points]


def _recorded(model: nn.Module, names: list[str]):
    """intervene() edits that keep each named tensor (first row of the batch) and change nothing."""
    kept: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def edit(tensor: torch.Tensor) -> torch.Tensor:
            kept[name] = tensor[0].detach()
            return tensor
        return edit

    return intervene(model, {name: keep(name) for name in names}), kept


def _block(name: str, attention, residual, stream, sources, weights, cross: bool, causal: bool) -> AttentionBlock:
    norm = residual.norm
    return AttentionBlock(
        name=name, stream=stream.to(DTYPE), sources=sources.to(DTYPE), weights=weights.to(DTYPE),
        w_v=attention.w_v.weight.detach().to(DTYPE), b_v=attention.w_v.bias.detach().to(DTYPE),
        w_o=attention.w_o.weight.detach().to(DTYPE), b_o=attention.w_o.bias.detach().to(DTYPE),
        gamma=norm.weight.detach().to(DTYPE), beta=norm.bias.detach().to(DTYPE), eps=float(norm.eps),
        norm_first=residual.norm_first, cross=cross, causal=causal)


def _self_sources(residual, stream: torch.Tensor) -> torch.Tensor:
    """What a self-attention block projects its values from: its input, or (pre-LN) its input's norm."""
    return fn.layer_norm(residual.norm)(stream) if residual.norm_first else stream          # [T, d]


def forced_pass(model: nn.Module, src_ids: Sequence[int], out_ids: Sequence[int]) -> ForcedPass:
    """Run the model once on (source ids, forced output ids; the decoder reads start id + out_ids[:-1])
    and return its attention blocks. Ids are checked by the caller (explorer.studies.contributions.sentence)."""
    cfg = model.cfg
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=device)                  # [1, S]
    out = torch.tensor([list(out_ids)], dtype=torch.long, device=device)                  # [1, T]
    tgt_in = torch.cat([torch.full_like(out[:, :1], special_ids(model).start), out[:, :-1]], dim=1)  # [1, T]
    names = (_names("encoder", cfg.n_encoder_layers, ("self_attn.weights",))
             + _names("decoder", cfg.n_decoder_layers, ("self_attn.weights", "self_attn.out", "cross_attn.weights")))
    hooks, kept = _recorded(model, names)
    with torch.no_grad(), eval_mode(model), hooks:
        memory, src_mask = model.encode(src)                                                # [1, S, d]
        log_probs = model.generator(model.decode(tgt_in, memory, src_mask))                 # [1, T, V]
    token_lp = log_probs[0].gather(1, out[0].unsqueeze(1)).squeeze(1).tolist()
    with torch.no_grad():
        selfs, crosses = _decoder_blocks(model, kept, memory[0])
        return ForcedPass(encoder=_encoder_blocks(model, kept), decoder_self=selfs, cross=crosses,
                          token_logprobs=token_lp)


def _encoder_blocks(model: nn.Module, kept: dict) -> list[AttentionBlock]:
    blocks = []
    for l, layer in enumerate(model.encoder.layers):
        stream = kept["encoder.embed.out" if l == 0 else f"encoder.layers.{l - 1}.resid_post"]   # [S, d]
        name = f"encoder.layers.{l}.self_attn"
        blocks.append(_block(name, layer.self_attn, layer.attn_block, stream,
                             _self_sources(layer.attn_block, stream), kept[f"{name}.weights"], False, False))
    return blocks


def _decoder_blocks(model: nn.Module, kept: dict, memory: torch.Tensor) -> tuple[list, list]:
    selfs, crosses = [], []
    for l, layer in enumerate(model.decoder.layers):
        stream = kept["decoder.embed.out" if l == 0 else f"decoder.layers.{l - 1}.resid_post"]   # [T, d]
        name = f"decoder.layers.{l}"
        selfs.append(_block(f"{name}.self_attn", layer.self_attn, layer.self_block, stream,
                            _self_sources(layer.self_block, stream), kept[f"{name}.self_attn.weights"], False, True))
        attended = kept[f"{name}.self_attn.out"]                                            # [T, d]
        block = layer.self_block
        after_self = fn.residual(stream, lambda _: attended, fn.layer_norm(block.norm), block.norm_first)   # [T, d]
        crosses.append(_block(f"{name}.cross_attn", layer.cross_attn, layer.cross_block, after_self, memory,
                              kept[f"{name}.cross_attn.weights"], True, False))
    return selfs, crosses
