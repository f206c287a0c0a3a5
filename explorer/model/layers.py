"""The building blocks of the paper, one small class per concept.

Every quantity a user may want to see passes through a `CapturePoint` (an identity module), so its
module path *is* its capture name (`decoder.layers.1.cross_attn.weights`) and a plain
`register_forward_hook` reads it. Attention takes the fused `scaled_dot_product_attention` fast path
unless someone hooked its scores or weights; then it computes them explicitly so they exist.
The modules hold the parameters (their names are the checkpoints' names) and the capture points;
the arithmetic is model/functional.py's, which the plain decoding path runs too.
"""
from __future__ import annotations

import threading

import torch
import torch.nn.functional as F
from torch import nn

from explorer.model import functional as fn


def _applies(hook) -> bool:
    """A hook counts for the calling thread unless it belongs to another one: inspection.hooks marks
    its hooks with the thread that opened the capture (`owner`); any other hook counts for everyone."""
    owner = getattr(hook, "owner", None)
    return owner is None or owner == threading.get_ident()


def _has_own_hooks(module: nn.Module) -> bool:
    # tuple(): a copy taken in one step, so another thread adding or removing a hook meanwhile is harmless
    hooks = tuple(module._forward_hooks.values()) + tuple(module._forward_pre_hooks.values())
    return any(_applies(h) for h in hooks)


def hooked(module: nn.Module) -> bool:
    """Whether a forward (pre-)hook that applies to this thread sits on `module` or any module below it.

    Per thread, so that one user's capture never changes another user's computation path (the plain
    decoder, the fused attention kernel): each thread gets the same numbers as if it ran alone."""
    return any(_has_own_hooks(m) for m in module.modules())


class CapturePoint(nn.Identity):
    """Identity module marking a named quantity; hooks on it see (and may replace) the tensor."""

    def is_hooked(self) -> bool:
        return _has_own_hooks(self)


sinusoidal_table = fn.sinusoidal_table        # the formula is functional.py's; the model's name for it


class Dropout(nn.Dropout):
    """nn.Dropout whose CPU masks are cut from random 64-bit integers instead of bernoulli_.

    Keep probability 1 - p (p rounded to a multiple of 2^-15) and scaling 1/(1-p). On CPU,
    bernoulli_ draws a random double per element, which made dropout ~10% of a training step;
    one 64-bit draw (63 random bits, documented for random_()) yields four 15-bit uniform integers,
    about 8x fewer generator calls per element. Other devices keep PyTorch's fused kernel.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_()               # [ceil(n/4)] in [0, 2^63)
        draws = bits.view(torch.int16)[:n].view(x.shape).bitwise_and_(0x7FFF)      # same shape as x, 15 bits
        keep = draws >= round(self.p * 32768)                                       # True with prob. 1 - p
        return x * keep.to(x.dtype).mul_(1.0 / (1.0 - self.p))                     # same shape as x


class Embeddings(nn.Module):
    """Token embedding scaled by sqrt(d_model) (or not) plus a positional encoding (sinusoidal or learned).

    Capture points: `tokens` (scaled token vectors), `positions` (the encoding added), `out`.
    `offset` shifts positions for incremental decoding (one new token at position `offset`).
    `layout` orders the sinusoids, `frequencies` and `pe_offset` choose their frequencies and the first
    position's index (functional.sinusoidal_table); `scaled` False leaves tokens unscaled.
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, base: float, positions: str,
                 dropout: float, lookup: nn.Embedding | None = None, layout: str = "interleaved",
                 scaled: bool = True, frequencies: str = "paper", pe_offset: int = 0):
        super().__init__()
        self.d_model = d_model
        self.scale = fn.embedding_scale(d_model, scaled)   # the plain decoding path reads it here
        self.lookup = lookup if lookup is not None else nn.Embedding(vocab_size, d_model)
        self.learned = positions == "learned"
        if self.learned:
            self.position_table = nn.Embedding(max_len, d_model)
        else:
            self.register_buffer("pe", fn.sinusoidal_table(max_len, d_model, base, layout, frequencies, pe_offset),
                                 persistent=False)
        self.dropout = Dropout(dropout)
        self.tokens = CapturePoint()
        self.positions = CapturePoint()
        self.out = CapturePoint()

    @property
    def table(self) -> torch.Tensor:
        """The positional rows [max_len, d]: the learned parameters or the sinusoidal buffer."""
        return self.position_table.weight if self.learned else self.pe

    def token_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """The scaled token vectors of `ids` [B, T] -> [B, T, d], before positions (the `tokens` point)."""
        return fn.token_vectors(ids, self.lookup, self.scale)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.out(fn.embed(ids, self.lookup, self.table, offset, self.scale, self.tokens,
                                 self.positions, self.dropout))                 # [B, T, d]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over n_heads heads, written out.

    Capture points: `scores` (QK^T/sqrt(d_k) after the mask, before softmax), `weights` (after
    softmax, before dropout), `context` (per-head output [B, H, q, d_head]), `out`.
    `cache` (a dict owned by the caller) enables incremental decoding: for self-attention new keys
    and values are appended; for cross-attention (`static_kv`) the projected memory is kept.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout_p = dropout
        self.scores = CapturePoint()
        self.weights = CapturePoint()
        self.context = CapturePoint()
        self.out = CapturePoint()

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return fn.split_heads(x, self.n_heads)                                  # [B, T, d] -> [B, H, T, dh]

    @staticmethod
    def _product(x: torch.Tensor, *parts: nn.Linear) -> torch.Tensor:
        """Several projections of the same input as one matrix product (one GEMM, not 2 or 3).

        The weights stay separate parameters (w_q, w_k, w_v: checkpoints and names unchanged); only
        the product is fused, so the result equals the separate projections up to float rounding.
        """
        weight = torch.cat([p.weight for p in parts])                           # [n*d, d]
        bias = torch.cat([p.bias for p in parts])                               # [n*d]
        return F.linear(x, weight, bias)                                        # [B, T, n*d]

    def _fused(self, x: torch.Tensor, *parts: nn.Linear) -> list[torch.Tensor]:
        return fn.split_product(self._product(x, *parts), len(parts), self.n_heads)  # n x [B, H, T, dh]

    def project_kv(self, kv_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self._fused(kv_in, self.w_k, self.w_v)                          # 2 x [B, H, k, dh]
        return k, v

    def forward(self, query: torch.Tensor, kv_in: torch.Tensor, mask: torch.Tensor | None,
                cache: dict | None = None, static_kv: bool = False) -> torch.Tensor:
        """query [B, q, d] attends to kv_in [B, k, d] -> [B, q, d]; `kv_in is query`: self-attention.

        mask: bool, True = may attend, broadcastable to [B, H, q, k]. Only a hook on `scores` or
        `weights` makes attention compute them explicitly (see functional.attend).
        """
        watch = (self.scores, self.weights) if self.scores.is_hooked() or self.weights.is_hooked() else None
        dropout_p = self.dropout_p if self.training else 0.0
        if kv_in is query and not static_kv:
            out = fn.self_attention(query, lambda x: self._product(x, self.w_q, self.w_k, self.w_v), self.w_o,
                                    self.n_heads, mask, cache, dropout_p, watch, self.context)   # [B, q, d]
        else:
            out = fn.cross_attention(query, kv_in, self.w_q, lambda x: self._product(x, self.w_k, self.w_v),
                                     self.w_o, self.n_heads, mask, cache if static_kv else None, dropout_p,
                                     watch, self.context)                       # [B, q, d]
        return self.out(out)                                                    # [B, q, d]


class FeedForward(nn.Module):
    """Position-wise FFN(x) = max(0, x W1 + b1) W2 + b2. Capture points: `hidden`, `out`.

    `activation` names the non-linearity in functional.ACTIVATIONS (the paper's "relu").
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu"):
        super().__init__()
        self.activation = fn.check_activation(activation)
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)
        self.hidden = CapturePoint()
        self.out = CapturePoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(fn.feed_forward(x, self.w_1, self.w_2, self.activation, self.hidden,
                                        self.dropout))                          # [B, T, d]


class Residual(nn.Module):
    """x + Dropout(sublayer(x)) with LayerNorm after (post-norm, the paper) or before (pre-norm)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        return fn.residual(x, sublayer, self.norm, self.norm_first, self.dropout)  # [B, T, d]


class Generator(nn.Module):
    """Linear projection to the vocabulary + log-softmax. Capture point: `logits`.

    `weight` shares a target embedding matrix (tied); `bias` adds a learned [V] logits bias
    (`proj.bias`, Marian's final_logits_bias), which both decoding paths read with the weight.
    """

    def __init__(self, d_model: int, vocab_size: int, weight: nn.Parameter | None = None, bias: bool = False):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)
        if weight is not None:
            self.proj.weight = weight
        self.logits = CapturePoint()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return fn.log_probs(self.logits(self.proj(hidden)))                    # [B, T, V]
