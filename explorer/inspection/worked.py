"""The Architecture page's worked examples: one block of the live model, in its real numbers.

A lecture walks through Figure 1 of the paper block by block; for each block this module returns
plain dataclasses of numpy arrays (no torch, no Streamlit) computed from one captured Trace
(explorer.decoding.attention_trace) and the model's own modules:

- the embedding sum of one token (lookup row x scale + positional row = `embed.out`);
- one head's attention for one query, written out: q.k for each key, / sqrt(d_k), softmax, the
  weighted sum of V. Q, K and V are not capture points, so they are recomputed here by the layer's
  own w_q / w_k / w_v applied to the sublayer's input, which is rebuilt from captured tensors with
  the model's own residual formula (functional.residual) and LayerNorm modules. The explicit dot
  products and softmax are the only formulas written out again, on purpose, and every result
  carries the captured value it must equal (tests/unit/test_worked.py holds them to 1e-5);
- the heads concatenated and projected by W^O (= the captured attention `out`);
- the FFN's hidden activations (how many are zero after ReLU, near zero for swish/gelu);
- the residual stream's norm through the layers and one LayerNorm's effect;
- the generator's top-k next tokens at a temperature;
- the parameter count of every block, adding up to model.num_parameters().
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np
import torch
from torch import nn

from explorer.config import ModelConfig
from explorer.inspection.trace import Trace, attention_kind
from explorer.model import functional as fn
from explorer.model.skeleton import parameter_count

NEAR_ZERO = 1e-2          # |h| below this counts as "near zero" for a smooth activation (swish, gelu)

# The paper's Table 3 sizes ("Attention Is All You Need", Vaswani et al. 2017) with the 37,000-token
# shared source-target BPE vocabulary of its WMT 2014 English-German setup (section 5.1), embeddings
# and output projection tied (section 3.4); `stated` is the parameter count Table 3 prints.
PAPER_MODELS = {
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, stated=65_000_000),
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, stated=213_000_000),
}
PAPER_VOCAB = 37_000


# ------------------------------------------------------------------------------ the stream

def _tensor(array: np.ndarray, model: nn.Module) -> torch.Tensor:
    param = next(model.parameters())
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(param.device)


def _numpy(t: torch.Tensor) -> np.ndarray:
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
    x = _tensor(layer_input(trace, stack, layer), model)                        # [T, d]
    before, inputs = {}, {}
    for name, block in _blocks(model, stack, layer):
        before[name] = x
        inputs[name] = block.norm(x) if norm_first else x                       # [T, d]
        out = _tensor(trace[f"{stack}.layers.{layer}.{name}.out"][0], model)    # [T, d]
        x = fn.residual(x, lambda _h, _out=out: _out, block.norm, norm_first)   # [T, d]
    return Stream(before=before, inputs=inputs, after=x)


@torch.inference_mode()
def encoder_memory(model: nn.Module, trace: Trace) -> torch.Tensor:
    """What cross-attention reads: the last encoder layer's output through the encoder's final norm
    (an identity for a post-norm model). [S, d]"""
    last = trace[f"encoder.layers.{model.cfg.n_encoder_layers - 1}.resid_post"][0]   # [S, d]
    return model.encoder.norm(_tensor(last, model))                               # [S, d]


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
        return max(_max_diff(self.scaled, self.captured_tokens), _max_diff(self.total, self.captured_out))


def _ids_and_tokens(trace: Trace, stack: str) -> tuple[list[int], list[str]]:
    if stack == "encoder":
        return list(trace.meta.get("src_ids", [])), list(trace.src_tokens)
    return list(trace.meta.get("tgt_in_ids", [])), list(trace.tgt_tokens)


def worked_embedding(model: nn.Module, trace: Trace, stack: str, position: int) -> EmbeddingWorked:
    """Token `position` of `stack` ("encoder": the source, "decoder": BOS + output[:-1]) entering the model."""
    ids, tokens = _ids_and_tokens(trace, stack)
    _check_index(position, len(ids), "position")
    embed = getattr(model, stack).embed
    row = _numpy(embed.lookup.weight[ids[position]])                             # [d]
    pe = trace[f"{stack}.embed.positions"][0, position].astype(np.float64)       # [d]
    scaled = row * embed.scale                                                   # [d]
    cfg = model.cfg
    return EmbeddingWorked(stack=stack, position=position, token=tokens[position], token_id=int(ids[position]),
                           row=row, scale=float(embed.scale), scaled=scaled, pe=pe, total=scaled + pe,
                           captured_tokens=trace[f"{stack}.embed.tokens"][0, position].astype(np.float64),
                           captured_out=trace[f"{stack}.embed.out"][0, position].astype(np.float64),
                           positions=cfg.positions, layout=cfg.pe_layout)


# ------------------------------------------------------------------------------- attention

@dataclass(frozen=True)
class AttentionWorked:
    """One head, one query: softmax(q.K^T / sqrt(d_k), masked) V, every step in numbers."""

    kind: str                   # "encoder" | "decoder" | "cross" (explorer.inspection.trace)
    layer: int                  # 0-based
    head: int                   # 0-based
    query: int                  # the query's position
    query_token: str
    key_tokens: list[str]
    q: np.ndarray               # [dh]
    k: np.ndarray               # [keys, dh]
    v: np.ndarray               # [keys, dh]
    dots: np.ndarray            # q.k_j                                   [keys]
    d_k: int
    scores: np.ndarray          # dots / sqrt(d_k); -inf where masked     [keys]
    masked: np.ndarray          # bool: key after the query (decoder self-attention)  [keys]
    weights: np.ndarray         # softmax(scores)                         [keys]
    context: np.ndarray         # sum_j weights_j v_j                     [dh]
    captured_scores: np.ndarray   # `scores` capture point, this row      [keys]
    captured_weights: np.ndarray  # `weights`                              [keys]
    captured_context: np.ndarray  # `context`, this head and query         [dh]

    @property
    def sqrt_d_k(self) -> float:
        return math.sqrt(self.d_k)

    @property
    def errors(self) -> dict[str, float]:
        """Largest |recomputed - captured| of the unmasked scores, the weights and the context."""
        open_ = ~self.masked
        return {"scores": _max_diff(self.scores[open_], self.captured_scores[open_]),
                "weights": _max_diff(self.weights, self.captured_weights),
                "context": _max_diff(self.context, self.captured_context)}


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max()) if a.size else 0.0


def _check_index(value: int, size: int, what: str) -> None:
    if not 0 <= value < size:
        raise ValueError(f"{what} must be in [0, {size - 1}], not {value}")


@torch.inference_mode()
def head_qkv(model: nn.Module, trace: Trace, kind: str, layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q [H, q, dh], K [H, k, dh], V [H, k, dh] of one attention layer: the layer's own projections
    of the sublayer's input (queries) and of that input or the encoder's memory (keys and values)."""
    spec = attention_kind(kind)
    _check_index(layer, spec.n_layers(model.cfg), "layer")
    stream = layer_stream(model, trace, spec.stack, layer)
    x = stream.inputs[spec.block]                                               # [q, d]
    memory = encoder_memory(model, trace) if spec.block == "cross_attn" else x  # [k, d]
    attn = getattr(getattr(model, spec.stack).layers[layer], spec.block)
    heads = model.cfg.n_heads
    q = fn.split_heads(attn.w_q(x).unsqueeze(0), heads)[0]                      # [H, q, dh]
    k = fn.split_heads(attn.w_k(memory).unsqueeze(0), heads)[0]                 # [H, k, dh]
    v = fn.split_heads(attn.w_v(memory).unsqueeze(0), heads)[0]                 # [H, k, dh]
    return _numpy(q), _numpy(k), _numpy(v)


def worked_attention(model: nn.Module, trace: Trace, kind: str, layer: int, head: int, query: int) -> AttentionWorked:
    """The arithmetic of head `head` (0-based) at query position `query`, with the captured values beside it."""
    spec = attention_kind(kind)
    q, k, v = head_qkv(model, trace, kind, layer)                               # [H, q, dh], [H, k, dh] x 2
    _check_index(head, q.shape[0], "head")
    _check_index(query, q.shape[1], "query")
    q_tokens, k_tokens = trace.axes(kind)
    q_h, k_h, v_h = q[head, query], k[head], v[head]                            # [dh], [k, dh], [k, dh]
    d_k = q_h.shape[0]
    dots = k_h @ q_h                                                            # [k]
    keys = np.arange(k_h.shape[0])                                              # [k]
    masked = keys > query if spec.causal else np.zeros(k_h.shape[0], dtype=bool)
    scores = np.where(masked, -np.inf, dots / math.sqrt(d_k))                   # [k]
    shifted = np.exp(scores - scores[~masked].max())                            # [k], 0 where masked
    weights = shifted / shifted.sum()                                           # [k]
    context = weights @ v_h                                                     # [dh]
    name = spec.capture_name(layer, "{}")
    return AttentionWorked(kind=kind, layer=layer, head=head, query=query, query_token=q_tokens[query],
                           key_tokens=list(k_tokens), q=q_h, k=k_h, v=v_h, dots=dots, d_k=d_k, scores=scores,
                           masked=masked, weights=weights, context=context,
                           captured_scores=trace[name.format("scores")][0, head, query].astype(np.float64),
                           captured_weights=trace[name.format("weights")][0, head, query].astype(np.float64),
                           captured_context=trace[name.format("context")][0, head, query].astype(np.float64))


@dataclass(frozen=True)
class HeadsOutput:
    """Concat(head_1 .. head_H) W^O + b at one query position."""

    kind: str
    layer: int
    query: int
    concat: np.ndarray          # the captured contexts side by side              [H * dh]
    projected: np.ndarray       # concat W_O^T + b, recomputed                    [d]
    contributions: np.ndarray   # each head's share: context_h W_O[:, h]^T       [H, d]
    bias: np.ndarray            # b_O                                             [d]
    captured_out: np.ndarray    # the attention's `out` capture point             [d]

    @property
    def error(self) -> float:
        return _max_diff(self.projected, self.captured_out)

    @property
    def head_norms(self) -> np.ndarray:
        return np.linalg.norm(self.contributions, axis=1)                      # [H]


@torch.inference_mode()
def heads_output(model: nn.Module, trace: Trace, kind: str, layer: int, query: int) -> HeadsOutput:
    """The heads' contexts (captured) concatenated and projected by the layer's own W^O."""
    spec = attention_kind(kind)
    _check_index(layer, spec.n_layers(model.cfg), "layer")
    context = trace[spec.capture_name(layer, "context")][:, :, query:query + 1]   # [1, H, 1, dh]
    _check_index(query, trace[spec.capture_name(layer, "context")].shape[2], "query")
    concat = fn.merge_heads(_tensor(context, model))[0, 0]                      # [H * dh]
    w_o = getattr(getattr(model, spec.stack).layers[layer], spec.block).w_o
    heads, d_head = context.shape[1], context.shape[3]
    weight = _numpy(w_o.weight).reshape(-1, heads, d_head)                      # [d, H, dh]
    contributions = np.einsum("hd,ohd->ho", context[0, :, 0].astype(np.float64), weight)  # [H, d]
    return HeadsOutput(kind=kind, layer=layer, query=query, concat=_numpy(concat), projected=_numpy(w_o(concat)),
                       contributions=contributions, bias=_numpy(w_o.bias),
                       captured_out=trace[spec.capture_name(layer, "out")][0, query].astype(np.float64))


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
    _check_index(position, hidden.shape[0], "position")
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
        err = _max_diff(self.output, self.module_output)
        if self.captured_output is not None:
            err = max(err, _max_diff(self.output, self.captured_output))
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
    _check_index(layer, n_layers, "layer")
    states = [trace[f"{stack}.embed.out"][0]] + [trace[f"{stack}.layers.{i}.resid_post"][0] for i in range(n_layers)]
    _check_index(position, states[0].shape[0], "position")
    labels = ["embed"] + [f"layer {i + 1}" for i in range(n_layers)]
    final = getattr(model, stack).norm
    if cfg.norm_first:
        states.append(_numpy(final(_tensor(states[-1], model))))
        labels.append("final norm")
    norms = np.array([np.linalg.norm(s[position].astype(np.float64)) for s in states])          # [L+1]
    mean_norms = np.array([np.linalg.norm(s.astype(np.float64), axis=-1).mean() for s in states])  # [L+1]

    stream = layer_stream(model, trace, stack, layer)
    norm = _blocks(model, stack, layer)[-1][1].norm                              # the FFN block's LayerNorm
    if cfg.norm_first:
        z = stream.before["ffn"]                                                 # [T, d]
        where, captured = "before the feed-forward (pre-norm: the FFN reads its output)", None
    else:
        out = _tensor(trace[f"{stack}.layers.{layer}.ffn.out"][0], model)          # [T, d]
        z = stream.before["ffn"] + out                                           # [T, d]
        where = "after the feed-forward's residual sum (post-norm: its output is the layer's output)"
        captured = trace[f"{stack}.layers.{layer}.resid_post"][0, position].astype(np.float64)
    z_p = _numpy(z[position])                                                    # [d]
    mean, var = z_p.mean(), z_p.var()
    std = math.sqrt(var + norm.eps)
    normalized = (z_p - mean) / std                                              # [d]
    gain, bias = _numpy(norm.weight), _numpy(norm.bias)
    ln = LayerNormWorked(where=where, z=z_p, mean=float(mean), std=std, normalized=normalized, gain=gain, bias=bias,
                         output=gain * normalized + bias, module_output=_numpy(norm(z[position])),
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
    _check_index(position, logits.shape[0], "position")
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


# ------------------------------------------------------------------------------ parameters

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


def paper_config(name: str) -> ModelConfig:
    """The paper's base or big model as a ModelConfig: Table 3's sizes, the 37k shared vocabulary,
    tied embeddings and output projection, sinusoidal positions, post-norm, ReLU."""
    sizes = {k: v for k, v in PAPER_MODELS[name].items() if k != "stated"}
    return ModelConfig(src_vocab_size=PAPER_VOCAB, tgt_vocab_size=PAPER_VOCAB, tie_embeddings=True, **sizes)


def paper_parameter_count(name: str) -> int:
    """Our count for the paper's model `name` ("base" or "big"), from its config alone."""
    return parameter_count(paper_config(name))

