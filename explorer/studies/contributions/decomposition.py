"""One attention block's output as a sum of one vector per input token (plus bias terms), and each
token's contribution to it: ALTI's layer-wise step.

Ferrando, Gállego & Costa-jussà, "Measuring the Mixing of Contextual Information in the Transformer"
(EMNLP 2022) write an attention block's output at position i exactly as

    y_i = sum_j T_i(x_j) + bias_i

* multi-head attention: sum_h A_h[i, j] f_h(x_j), f_h(x) = (x W_V^h + b_V^h) W_O^h (the value bias
  travels inside each token's vector, weighted by attention, as in the reference code);
* the residual: the block's own input x_i is one more term (at j = i in self-attention; a column of
  its own, after the source tokens, in cross-attention: Ferrando, Gállego, Alastruey, Escolano &
  Costa-jussà, "Towards Opening the Black Box of Neural Machine Translation: Source and Target
  Contributions to the Model's Predictions", EMNLP 2022);
* post-LN, the LayerNorm after the sum is linear once its row statistics are fixed at their actual
  values: LN(u) = gamma * (u - mean(u)) / s + beta with s = sqrt(var(u) + eps) of the real u_i, so
  each vector becomes gamma * (T - mean(T)) / s_i, and b_O and beta are the bias terms. Pre-LN has no
  norm after the sum (its input norm acts on each x_j alone, inside f_h).

Contribution of token j to y_i (ALTI): c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), divided by the
row's sum, so a row is a distribution over the block's inputs (the reference code's "min_sum"
normalisation with the resultant's norm). Vectors are built a few rows at a time (ROW_BYTES), since
all of them at once is rows x keys x d_model numbers (268 MB in float64 at 256 tokens and d = 512).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor
ROW_BYTES = 32 * 1024 * 1024          # at most this many bytes of transformed vectors at a time


@dataclass(frozen=True)
class AttentionBlock:
    """What one attention block computed on one sentence, float64, and the parameters it used.

    `stream` [T, d] is the residual stream entering the block (the queries' side); `sources` [K, d] what
    its values are projected from (the stream itself post-LN, its LayerNorm pre-LN, the encoder's
    memory in cross-attention); `weights` [H, T, K] the attention the model computed.
    """

    name: str                     # the attention module's path, e.g. decoder.layers.1.cross_attn
    stream: Tensor                # [T, d]
    sources: Tensor               # [K, d]
    weights: Tensor               # [H, T, K]
    w_v: Tensor                   # [d, d] (out, in), as nn.Linear holds it
    b_v: Tensor                   # [d]
    w_o: Tensor                   # [d, d]
    b_o: Tensor                   # [d]
    gamma: Tensor                 # [d] the block's LayerNorm
    beta: Tensor                  # [d]
    eps: float
    norm_first: bool
    cross: bool                   # the residual is a column of its own (cross-attention), not j = i
    causal: bool                  # key j is visible to query i only when j <= i (decoder self-attention)

    @property
    def n_inputs(self) -> int:
        """Columns of the block's contribution matrix: K keys (+ the residual in cross-attention)."""
        return self.sources.shape[0] + (1 if self.cross else 0)


def value_vectors(block: AttentionBlock) -> Tensor:
    """f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head and key: [H, K, d]."""
    heads = block.weights.shape[0]
    d = block.w_o.shape[0]
    v = (block.sources @ block.w_v.T + block.b_v).view(block.sources.shape[0], heads, -1)   # [K, H, dh]
    w_o = block.w_o.view(d, heads, -1).permute(1, 2, 0)                                     # [H, dh, d]
    return v.transpose(0, 1) @ w_o                                                          # [H, K, d]


def _raw_vectors(block: AttentionBlock, f: Tensor, rows: slice) -> Tensor:
    """The pre-norm terms of rows `rows`: attention per key plus the residual: [t, K(+1), d]."""
    per_key = block.weights[:, rows].permute(2, 1, 0) @ f.transpose(0, 1)                  # [K, t, H] @ [K, H, d]
    mixed = per_key.transpose(0, 1).contiguous()                                            # [t, K, d]
    stream = block.stream[rows]                                                             # [t, d]
    if block.cross:
        return torch.cat([mixed, stream.unsqueeze(1)], dim=1)                               # [t, K+1, d]
    start = rows.start or 0
    index = torch.arange(start, start + stream.shape[0], device=stream.device)             # [t]
    mixed[torch.arange(stream.shape[0], device=stream.device), index] += stream            # residual at j = i
    return mixed                                                                            # [t, K, d]


def transformed_vectors(block: AttentionBlock, rows: slice | None = None,
                        f: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(T_i(x_j) [t, K(+1), d], bias_i [t, d]) for the rows `rows` (all by default): their sum over j
    plus the bias is the block's output at those rows, exactly (see the module docstring)."""
    rows = rows or slice(0, block.stream.shape[0])
    f = value_vectors(block) if f is None else f                                           # [H, K, d]
    vectors = _raw_vectors(block, f, rows)                                                  # [t, K', d]
    bias = block.b_o.expand(vectors.shape[0], -1)                                           # [t, d]
    if block.norm_first:
        return vectors, bias
    u = vectors.sum(dim=1) + bias                                                           # [t, d] the norm's input
    scale = block.gamma / torch.sqrt(u.var(dim=-1, unbiased=False, keepdim=True) + block.eps)   # [t, d]
    vectors = (vectors - vectors.mean(dim=-1, keepdim=True)) * scale.unsqueeze(1)           # [t, K', d]
    bias = (bias - bias.mean(dim=-1, keepdim=True)) * scale + block.beta                    # [t, d]
    return vectors, bias


def row_chunks(block: AttentionBlock, budget: int = ROW_BYTES) -> list[slice]:
    """Row slices whose transformed vectors fit in `budget` bytes (at least one row each)."""
    n_rows = block.stream.shape[0]
    per_row = block.n_inputs * block.stream.shape[1] * block.stream.element_size()
    step = max(1, budget // max(per_row, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def visible(block: AttentionBlock) -> Tensor:
    """Which inputs may contribute to each row: [T, K(+1)] bool (every one but a decoder's later tokens)."""
    n_rows, n_keys = block.stream.shape[0], block.sources.shape[0]
    seen = torch.ones(n_rows, block.n_inputs, dtype=torch.bool, device=block.stream.device)   # [T, K']
    if block.causal:
        seen[:, :n_keys] = torch.ones(n_rows, n_keys, dtype=torch.bool, device=seen.device).tril()
    return seen


def normalise(closeness: Tensor, seen: Tensor) -> tuple[Tensor, int]:
    """Clipped closeness [T, K'] -> rows summing to 1, and how many rows had nothing left after the
    clip (possible in principle when every term is far from the output): those are spread evenly over
    their visible inputs, so every row stays a distribution, and the count is reported."""
    c = closeness.clamp(min=0) * seen                                                       # [T, K']
    total = c.sum(dim=-1, keepdim=True)                                                     # [T, 1]
    empty = total.squeeze(-1) <= 0                                                          # [T]
    if bool(empty.any()):
        c[empty] = seen[empty].to(c.dtype)
        total = c.sum(dim=-1, keepdim=True)
    return c / total, int(empty.sum())


def contributions(block: AttentionBlock, budget: int = ROW_BYTES) -> tuple[Tensor, int]:
    """ALTI's contribution matrix of the block, [T, K(+1)] rows summing to 1, and the count of rows
    that needed normalise()'s fallback."""
    f = value_vectors(block)                                                                # [H, K, d]
    closeness = []
    for rows in row_chunks(block, budget):
        vectors, bias = transformed_vectors(block, rows, f)                                 # [t, K', d], [t, d]
        output = vectors.sum(dim=1) + bias                                                  # [t, d] y_i
        distance = (output.unsqueeze(1) - vectors).abs().sum(dim=-1)                        # [t, K'] ||y_i - T_ij||_1
        closeness.append(output.abs().sum(dim=-1, keepdim=True) - distance)                 # [t, K']
    return normalise(torch.cat(closeness), visible(block))
