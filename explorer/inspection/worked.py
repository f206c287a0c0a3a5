"""The Architecture page's worked examples: one block of the live model, in its real numbers.

A lecture walks through Figure 1 of the paper block by block; for each block this module returns
plain dataclasses of numpy arrays (no torch, no Streamlit) computed from one captured Trace
(explorer.decoding.attention_trace) and the model's own modules:

- the embedding sum of one token (lookup row x scale + positional row = `embed.out`);
- the sublayer inputs, rebuilt from captured tensors with the model's own residual formula
  (functional.residual) and LayerNorm modules (`layer_stream`), which worked_attention.py feeds to a
  layer's w_q / w_k / w_v for one head's attention written out;
- the FFN's hidden activations (how many are zero after ReLU, near zero for swish/gelu);
- the residual stream's norm through the layers and one LayerNorm's effect;
- the generator's top-k next tokens at a temperature.
The parameter counts per block are inspection/parameters.py's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
import torch
from torch import nn

from explorer.config import ModelConfig
from explorer.inspection.trace import Trace
from explorer.model import functional as fn

NEAR_ZERO = 1e-2          # |h| below this counts as "near zero" for a smooth activation (swish, gelu)



# ------------------------------------------------------------------------------ the stream

def to_tensor(array: np.ndarray, model: nn.Module) -> torch.Tensor:
    param = next(model.parameters())
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(param.device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float64)


def _blocks(model: nn.Module, stack: str, layer: int) -> list[tuple[str, nn.Module]]:
    """(sublayer name, its Residual) in the order functional.encoder_layer / decoder_layer run them."""
    mod = getattr(model, stack).layers[layer]
    if stack == "encoder":
        return [("self_attn", mod.attn_block), ("ffn", mod.ffn_block)]
    return [("self_attn", mod.self_block), ("cross_attn", mod.cross_block), ("ffn", mod.ffn_block)]


def layer_input(trace: Trace, stack: str, layer: int) -> np.ndarray:
    """The residual stream entering layer `layer` (0-based): embed.out, else the previous resid_post. [T, d]"""
    name = f"{stack}.embed.out" if layer == 0 else f"{stack}.layers.{layer - 1}.resid_post"
    return trace[name][0]                                                       # [T, d]


@dataclass(frozen=True)
class Stream:
    """One layer's residual stream around each sublayer (float32 tensors on the model's device)."""

    before: dict[str, torch.Tensor]      # the stream entering each sublayer's residual block  [T, d]
    inputs: dict[str, torch.Tensor]      # what the sublayer itself reads (normed first if pre-norm) [T, d]
    after: torch.Tensor                  # the layer's output, to be equal to resid_post  [T, d]


@torch.inference_mode()
def layer_stream(model: nn.Module, trace: Trace, stack: str, layer: int) -> Stream:
    """Rebuild a layer's stream from its captured input and each sublayer's captured `out`, with the
    model's own residual formula and norms (the dropout is the identity in eval mode)."""
    norm_first = model.cfg.norm_first
    x = to_tensor(layer_input(trace, stack, layer), model)                        # [T, d]
    before, inputs = {}, {}
    for name, block in _blocks(model, stack, layer):
        before[name] = x
        inputs[name] = block.norm(x) if norm_first else x                       # [T, d]
        out = to_tensor(trace[f"{stack}.layers.{layer}.{name}.out"][0], model)    # [T, d]
        x = fn.residual(x, lambda _h, _out=out: _out, block.norm, norm_first)   # [T, d]
    return Stream(before=before, inputs=inputs, after=x)


@torch.inference_mode()
def encoder_memory(model: nn.Module, trace: Trace) -> torch.Tensor:
    """What cross-attention reads: the last encoder layer's output through the encoder's final norm
    (an identity for a post-norm model). [S, d]"""
    last = trace[f"encoder.layers.{model.cfg.n_encoder_layers - 1}.resid_post"][0]   # [S, d]
    return model.encoder.norm(to_tensor(last, model))                               # [S, d]


def max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max()) if a.size else 0.0


def check_index(value: int, size: int, what: str) -> None:
    if not 0 <= value < size:
        raise ValueError(f"{what} must be in [0, {size - 1}], not {value}")


# ------------------------------------------------------------------------------ embeddings

@dataclass(frozen=True)
class EmbeddingWorked:
    stack: str
    position: int
    token: str
    token_id: int
    row: np.ndarray            # E[token_id], the lookup row                        [d]
    scale: float               # sqrt(d_model), or 1 for an unscaled model
    scaled: np.ndarray         # row * scale, recomputed                             [d]
    pe: np.ndarray             # the positional row added (captured embed.positions) [d]
    total: np.ndarray          # scaled + pe, recomputed                             [d]
    captured_tokens: np.ndarray  # embed.tokens                                      [d]
    captured_out: np.ndarray     # embed.out                                         [d]
    positions: str             # "sinusoidal" | "learned"
    layout: str                # "interleaved" | "halves"

    @property
    def norms(self) -> dict[str, float]:
        return {"row": float(np.linalg.norm(self.row)), "scaled": float(np.linalg.norm(self.scaled)),
                "pe": float(np.linalg.norm(self.pe)), "total": float(np.linalg.norm(self.total))}

    @property
    def error(self) -> float:
        """Largest difference between the recomputed and the captured vectors."""
        return max(max_diff(self.scaled, self.captured_tokens), max_diff(self.total, self.captured_out))


def _ids_and_tokens(trace: Trace, stack: str) -> tuple[list[int], list[str]]:
    if stack == "encoder":
        return list(trace.meta.get("src_ids", [])), list(trace.src_tokens)
    return list(trace.meta.get("tgt_in_ids", [])), list(trace.tgt_tokens)


def worked_embedding(model: nn.Module, trace: Trace, stack: str, position: int) -> EmbeddingWorked:
    """Token `position` of `stack` ("encoder": the source, "decoder": BOS + output[:-1]) entering the model."""
    ids, tokens = _ids_and_tokens(trace, stack)
    check_index(position, len(ids), "position")
    embed = getattr(model, stack).embed
    row = to_numpy(embed.lookup.weight[ids[position]])                             # [d]
    pe = trace[f"{stack}.embed.positions"][0, position].astype(np.float64)       # [d]
    scaled = row * embed.scale                                                   # [d]
    cfg = model.cfg
    return EmbeddingWorked(stack=stack, position=position, token=tokens[position], token_id=int(ids[position]),
                           row=row, scale=float(embed.scale), scaled=scaled, pe=pe, total=scaled + pe,
                           captured_tokens=trace[f"{stack}.embed.tokens"][0, position].astype(np.float64),
                           captured_out=trace[f"{stack}.embed.out"][0, position].astype(np.float64),
                           positions=cfg.positions, layout=cfg.pe_layout)


# ------------------------------------------------------------------------------------- FFN

@dataclass(frozen=True)
class FFNWorked:
    stack: str
    layer: int
    position: int
    activation: str             # ModelConfig.activation: "relu" | "swish" | "gelu"
    hidden: np.ndarray          # act(x W1 + b1) at the position (capture point ffn.hidden)  [d_ff]
    zero: int                   # exactly 0 (relu) or |h| < NEAR_ZERO (swish, gelu), at the position
    zero_per_position: np.ndarray  # the same count at every position                   [T]
    negative: int               # below 0 at the position (never for relu)
    threshold: float            # 0 for relu, NEAR_ZERO otherwise

    @property
    def d_ff(self) -> int:
        return int(self.hidden.shape[0])


def worked_ffn(trace: Trace, cfg: ModelConfig, stack: str, layer: int, position: int) -> FFNWorked:
    hidden = trace[f"{stack}.layers.{layer}.ffn.hidden"][0].astype(np.float64)   # [T, d_ff]
    check_index(position, hidden.shape[0], "position")
    exact = cfg.activation == "relu"
    zero = hidden == 0 if exact else np.abs(hidden) < NEAR_ZERO                  # [T, d_ff]
    return FFNWorked(stack=stack, layer=layer, position=position, activation=cfg.activation,
                     hidden=hidden[position], zero=int(zero[position].sum()),
                     zero_per_position=zero.sum(axis=1), negative=int((hidden[position] < 0).sum()),
                     threshold=0.0 if exact else NEAR_ZERO)


# ------------------------------------------------------------------------ residual and norm

@dataclass(frozen=True)
class LayerNormWorked:
    """One LayerNorm at one position: z -> (z - mean) / sqrt(var + eps) -> gain * . + bias."""

    where: str                  # which norm, in words
    z: np.ndarray               # its input                                       [d]
    mean: float
    std: float                  # sqrt(var + eps), the divisor
    normalized: np.ndarray      # (z - mean) / std: mean 0, std ~1                [d]
    gain: np.ndarray            # [d]
    bias: np.ndarray            # [d]
    output: np.ndarray          # gain * normalized + bias, recomputed            [d]
    module_output: np.ndarray   # the model's own LayerNorm of z                  [d]
    captured_output: np.ndarray | None  # resid_post when the norm ends the layer (post-norm)

    @property
    def error(self) -> float:
        err = max_diff(self.output, self.module_output)
        if self.captured_output is not None:
            err = max(err, max_diff(self.output, self.captured_output))
        return err


@dataclass(frozen=True)
class ResidualWorked:
    stack: str
    position: int
    labels: list[str]           # "embed", "layer 1", ... (then "final norm" for pre-norm)
    norms: np.ndarray           # ||stream|| at the position after each             [L + 1 (+1)]
    mean_norms: np.ndarray      # the same, averaged over positions                 [L + 1 (+1)]
    norm_first: bool
    layer_norm: LayerNormWorked


@torch.inference_mode()
def worked_residual(model: nn.Module, trace: Trace, stack: str, layer: int, position: int) -> ResidualWorked:
    """The stream's norm through `stack` at `position`, and the FFN block's LayerNorm of `layer`
    (post-norm: it makes resid_post; pre-norm: it makes the FFN's input)."""
    cfg = model.cfg
    n_layers = cfg.n_encoder_layers if stack == "encoder" else cfg.n_decoder_layers
    check_index(layer, n_layers, "layer")
    states = [trace[f"{stack}.embed.out"][0]] + [trace[f"{stack}.layers.{i}.resid_post"][0] for i in range(n_layers)]
    check_index(position, states[0].shape[0], "position")
    labels = ["embed"] + [f"layer {i + 1}" for i in range(n_layers)]
    final = getattr(model, stack).norm
    if cfg.norm_first:
        states.append(to_numpy(final(to_tensor(states[-1], model))))
        labels.append("final norm")
    norms = np.array([np.linalg.norm(s[position].astype(np.float64)) for s in states])          # [L+1]
    mean_norms = np.array([np.linalg.norm(s.astype(np.float64), axis=-1).mean() for s in states])  # [L+1]

    stream = layer_stream(model, trace, stack, layer)
    norm = _blocks(model, stack, layer)[-1][1].norm                              # the FFN block's LayerNorm
    if cfg.norm_first:
        z = stream.before["ffn"]                                                 # [T, d]
        where, captured = "before the feed-forward (pre-norm: the FFN reads its output)", None
    else:
        out = to_tensor(trace[f"{stack}.layers.{layer}.ffn.out"][0], model)          # [T, d]
        z = stream.before["ffn"] + out                                           # [T, d]
        where = "after the feed-forward's residual sum (post-norm: its output is the layer's output)"
        captured = trace[f"{stack}.layers.{layer}.resid_post"][0, position].astype(np.float64)
    z_p = to_numpy(z[position])                                                    # [d]
    mean, var = z_p.mean(), z_p.var()
    std = math.sqrt(var + norm.eps)
    normalized = (z_p - mean) / std                                              # [d]
    gain, bias = to_numpy(norm.weight), to_numpy(norm.bias)
    ln = LayerNormWorked(where=where, z=z_p, mean=float(mean), std=std, normalized=normalized, gain=gain, bias=bias,
                         output=gain * normalized + bias, module_output=to_numpy(norm(z[position])),
                         captured_output=captured)
    return ResidualWorked(stack=stack, position=position, labels=labels, norms=norms, mean_norms=mean_norms,
                          norm_first=cfg.norm_first, layer_norm=ln)


# ------------------------------------------------------------------------------- generator

@dataclass(frozen=True)
class NextTokens:
    position: int
    temperature: float
    ids: list[int]              # the k most probable, best first
    probs: np.ndarray           # softmax(logits / T) of those                   [k]
    logits: np.ndarray          # their logits                                   [k]
    chosen_id: int | None       # the output the trace holds at this position
    chosen_prob: float | None   # its probability at this temperature
    entropy: float              # of the whole distribution, in nats


def next_tokens(trace: Trace, position: int, temperature: float = 1.0, k: int = 10) -> NextTokens:
    """The generator's top-k at decoder position `position`: softmax(logits / T) with the model's
    own log-softmax (functional.log_probs). T > 0; T < 1 sharpens, T > 1 flattens."""
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a positive number, not {temperature}")
    logits = trace["generator.logits"][0]                                       # [T, V]
    check_index(position, logits.shape[0], "position")
    row = torch.from_numpy(logits[position].astype(np.float32))                # [V]
    log_p = fn.log_probs(row / temperature).double()                            # [V]
    probs = log_p.exp()                                                         # [V]
    k = max(1, min(int(k), row.shape[0]))
    top = torch.topk(probs, k)
    out_ids = trace.meta.get("tgt_ids", [])
    chosen = int(out_ids[position]) if position < len(out_ids) else None
    entropy = float(-(probs * torch.where(probs > 0, log_p, torch.zeros_like(log_p))).sum())
    return NextTokens(position=position, temperature=float(temperature), ids=[int(i) for i in top.indices],
                      probs=top.values.numpy(), logits=row[top.indices].double().numpy(), chosen_id=chosen,
                      chosen_prob=float(probs[chosen]) if chosen is not None else None, entropy=entropy)
