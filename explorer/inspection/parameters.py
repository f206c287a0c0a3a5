"""Parameter counts per block of a live model, beside the paper's base and big models.

The Architecture page's table: every parameter in a row per (layer, part) and diagram block, a tied
matrix counted once, so the rows add up to model.num_parameters(); the paper's models (explorer.config's
PAPER_MODELS) are counted from their configs alone (model/skeleton.py's parameter_count).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from explorer.config import ModelConfig, paper_config
from explorer.model.skeleton import parameter_count


@dataclass(frozen=True)
class ParameterRow:
    group: str                  # "Embeddings", "Encoder layer 1", ..., "Generator"
    part: str                   # "self-attention", "feed-forward", "norms", "token embeddings", ...
    block: str                  # the diagram block it belongs to (architecture BLOCKS key)
    count: int
    names: tuple[str, ...]      # the parameter names counted


def _part(name: str) -> tuple[str, str, str]:
    """(group, part, block) of a parameter name."""
    bits = name.split(".")
    if bits[0] == "generator":
        return "Generator", "output projection" + (" bias" if bits[-1] == "bias" else ""), "generator"
    stack = bits[0]
    side = "src" if stack == "encoder" else "tgt"
    if bits[1] == "embed":
        what = "learned positions" if bits[2] == "position_table" else "token embeddings"
        return "Embeddings", f"{stack} {what}", f"{side}_embed"
    if bits[1] == "norm":
        return f"{stack.capitalize()} final norm", "norm", f"{'enc' if side == 'src' else 'dec'}_norm"
    group = f"{stack.capitalize()} layer {int(bits[2]) + 1}"
    sub = bits[3]
    prefix = "enc" if stack == "encoder" else "dec"
    if sub.endswith("_block"):
        return group, "norms", f"{prefix}_norm"
    parts = {"self_attn": ("self-attention", f"{prefix}_attn"), "cross_attn": ("cross-attention", "cross_attn"),
             "ffn": ("feed-forward", f"{prefix}_ffn")}
    label, block = parts[sub]
    return group, label, block


def parameter_rows(model: nn.Module) -> list[ParameterRow]:
    """Every parameter of the model in a row per (group, part), a tied matrix counted once (under
    the first name that holds it, as named_parameters lists it); the counts add up to
    model.num_parameters()."""
    cfg = model.cfg
    shared = {"encoder.embed.lookup.weight": "token embeddings, shared by source and target"
                                             + (" and the output projection" if cfg.output_tied else ""),
              "decoder.embed.lookup.weight": "decoder token embeddings, also the output projection"}
    rows: dict[tuple[str, str], tuple[str, int, list[str]]] = {}
    for name, param in model.named_parameters():                               # tied parameters listed once
        group, part, block = _part(name)
        if name in shared and (cfg.tie_embeddings if name.startswith("encoder") else cfg.output_tied):
            part = shared[name]
        _, count, names = rows.get((group, part), (block, 0, []))
        rows[(group, part)] = (block, count + param.numel(), names + [name])
    return [ParameterRow(group, part, block, count, tuple(names))
            for (group, part), (block, count, names) in rows.items()]


def tied_note(cfg: ModelConfig) -> str:
    """Which matrices are one, in words (they are counted once)."""
    if cfg.tie_embeddings and cfg.output_tied:
        return "source embeddings, target embeddings and the output projection are one matrix, counted once"
    if cfg.tie_embeddings:
        return "source and target embeddings are one matrix, counted once; the output projection is its own"
    if cfg.output_tied:
        return "the output projection is the target embedding matrix, counted once"
    return "no matrices are shared"


def paper_parameter_count(name: str) -> int:
    """Our count for the paper's model `name` ("base" or "big"), from its config alone."""
    return parameter_count(paper_config(name))

