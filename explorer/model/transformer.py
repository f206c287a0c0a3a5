"""Encoder and decoder stacks and the full encoder-decoder model.

`encode()` and `decode()` are separate so decoding reuses one encoder pass; `decode()` takes an
optional `DecoderCache` for incremental decoding (one new token per step, keys/values kept).
The order of things (sublayers in a layer, layers in a stack) is model/functional.py's, shared with
the plain decoding path; these modules add the parameters, the capture points and the training
path's skipping of padded positions.
Capture names follow module paths: `encoder.layers.0.self_attn.weights`,
`decoder.layers.2.cross_attn.scores`, `decoder.layers.1.resid_post`, `generator.logits`, ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn

from explorer.config import ModelConfig
from explorer.model import functional as fn
from explorer.model.layers import (CapturePoint, Embeddings, FeedForward, Generator,
                                   MultiHeadAttention, Residual, hooked)
from explorer.model.loss import smoothed_cross_entropy


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.attn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.resid_post = CapturePoint()

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        x = fn.encoder_layer(x, lambda h: self.self_attn(h, h, src_mask), self.ffn,
                             (self.attn_block, self.ffn_block))                # [B, S, d]
        return self.resid_post(x)                                              # [B, S, d]


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.self_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.cross_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.resid_post = CapturePoint()

    def forward(self, y: torch.Tensor, self_mask: torch.Tensor | None, self_cache: dict | None,
                cross_cache: dict | None, memory: torch.Tensor, src_mask: torch.Tensor,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """y [B, T, d] -> [B, T, d]. The caches are one DecoderCache layer's "self" and "cross" dicts
        (None uncached), as functional.decoder_stack passes them.

        `rows` (training): flat indices of the positions whose outputs are used; see Decoder.
        """
        ffn_block = self.ffn_block
        if rows is not None and not (self.ffn.hidden.is_hooked() or self.ffn.out.is_hooked()):
            ffn_block = partial(self._rows_only, rows=rows)
        y = fn.decoder_layer(y, lambda h: self.self_attn(h, h, self_mask, self_cache),
                             lambda h: self.cross_attn(h, memory, src_mask, cross_cache, static_kv=True),
                             self.ffn, (self.self_block, self.cross_block, ffn_block))      # [B, T, d]
        return self.resid_post(y)                                                          # [B, T, d]

    def _rows_only(self, y: torch.Tensor, ffn, rows: torch.Tensor) -> torch.Tensor:
        """The FFN block is position-wise, so it can skip padded positions (~20% of a token batch)."""
        flat = y.flatten(0, 1)                                                             # [B*T, d]
        done = self.ffn_block(flat.index_select(0, rows), ffn)                             # [N, d]
        return flat.index_copy(0, rows, done).view_as(y)                                   # [B, T, d]


class Encoder(nn.Module):
    def __init__(self, cfg: ModelConfig, lookup: nn.Embedding | None):
        super().__init__()
        self.embed = Embeddings(cfg.src_vocab_size, cfg.d_model, cfg.max_len, cfg.pe_base,
                                cfg.positions, cfg.dropout, lookup, cfg.pe_layout, cfg.scale_embeddings,
                                cfg.pe_frequencies, cfg.pe_offset)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(src)                                                     # [B, S, d]
        for layer in self.layers:
            x = layer(x, src_mask)                                              # [B, S, d]
        return self.norm(x)


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig, lookup: nn.Embedding | None):
        super().__init__()
        self.embed = Embeddings(cfg.tgt_vocab_size, cfg.d_model, cfg.max_len, cfg.pe_base,
                                cfg.positions, cfg.dropout, lookup, cfg.pe_layout, cfg.scale_embeddings,
                                cfg.pe_frequencies, cfg.pe_offset)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                cache: "DecoderCache | None" = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """`rows` (the training loss only): flat indices into [B*T] of the positions whose outputs
        are used, each row's a prefix. The others (padding after a row's last target, which no
        earlier position attends to) may be skipped by position-wise blocks: their outputs are stale."""
        layers = [partial(layer, memory=memory, src_mask=src_mask, rows=rows) for layer in self.layers]
        return fn.decoder_stack(tgt, self.embed, layers, self.norm, cache)      # [B, T, d]


@dataclass
class DecoderCache:
    """Keys/values kept between incremental decoding steps: one dict per decoder layer."""

    layers: list[dict] = field(default_factory=list)
    length: int = 0

    @classmethod
    def empty(cls, n_layers: int) -> "DecoderCache":
        return cls(layers=[{} for _ in range(n_layers)], length=0)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` of every cached tensor (beam search re-parents hypotheses)."""
        for layer in self.layers:
            for part in layer.values():
                for key in ("k", "v"):
                    if key in part:
                        part[key] = part[key].index_select(0, index)           # [B', H, k, dh]


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    Which matrices are one: `tie_embeddings` makes the source and target embeddings one matrix
    (stored as encoder.embed.lookup.weight), `cfg.output_tied` makes the output projection the
    target embedding matrix (no generator.proj.weight of its own).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        shared = nn.Embedding(cfg.src_vocab_size, cfg.d_model) if cfg.tie_embeddings else None
        self.encoder = Encoder(cfg, shared)
        self.decoder = Decoder(cfg, shared)
        self.generator = Generator(cfg.d_model, cfg.tgt_vocab_size,
                                   self.decoder.embed.lookup.weight if cfg.output_tied else None,
                                   bias=cfg.final_logits_bias)
        self._init_weights()

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "lookup" not in name and "position_table" not in name:
                nn.init.xavier_uniform_(p)
        # N(0, d^-0.5): with tied weights the default N(0, 1) makes the first loss ~70 instead of ~log(V).
        for emb in {id(m): m for m in self.modules() if isinstance(m, nn.Embedding)}.values():
            nn.init.normal_(emb.weight, mean=0.0, std=self.cfg.d_model ** -0.5)
        if not self.cfg.output_tied:
            nn.init.normal_(self.generator.proj.weight, mean=0.0, std=self.cfg.d_model ** -0.5)
        if self.generator.proj.bias is not None:
            nn.init.zeros_(self.generator.proj.bias)

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return (src != self.cfg.pad_id).view(src.shape[0], 1, 1, src.shape[1])  # [B, 1, 1, S]

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src [B, S] -> (memory [B, S, d], src_mask [B, 1, 1, S])."""
        src_mask = self.src_mask(src)
        return self.encoder(src, src_mask), src_mask

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """tgt [B, T] (or the newest token, with a cache) -> hidden states [B, T, d]."""
        return self.decoder(tgt, memory, src_mask, cache)

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(self.cfg.n_decoder_layers)

    def decoding_watched(self) -> bool:
        """Whether decode() and generator() must run module by module, as written here.

        True when something watches them: a forward (pre-)hook on the decoder, the generator or
        any module below them (every capture point is such a module; capture(), intervene() and
        head ablation register their hooks there), or when the model is training (dropout draws
        fresh masks per module call). Otherwise the plain path (plain_decoder.py) computes the
        same log-probs faster, and decoding uses it.
        """
        return self.training or hooked(self.decoder) or hooked(self.generator)

    def logits(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits [B, T, V] for target inputs (BOS + target[:-1])."""
        memory, src_mask = self.encode(src)
        return self.generator.logits(self.generator.proj(self.decode(tgt_in, memory, src_mask)))

    def loss(self, src: torch.Tensor, tgt_in: torch.Tensor, targets: torch.Tensor,
             label_smoothing: float = 0.0) -> torch.Tensor:
        """Summed label-smoothed cross-entropy of the non-pad `targets` [B, T]: the training path.

        Equals F.cross_entropy(self.logits(src, tgt_in), targets, ignore_index=pad,
        label_smoothing=..., reduction="sum"), faster: the vocabulary projection (the largest
        matrix product) and the decoder's position-wise FFN blocks skip padded target positions
        (~20% of a token batch), and the loss has a hand-written backward (model/loss.py).
        (The generator.logits capture point is not on this path; inspection uses forward/logits.)
        """
        memory, src_mask = self.encode(src)
        real = targets != self.cfg.pad_id                                        # [B, T]
        # positions up to each row's last real target: later ones feed nothing the loss reads
        needed = real.int().flip(1).cummax(1).values.flip(1).bool()              # [B, T]
        rows = needed.flatten().nonzero().squeeze(1)                             # [M]
        hidden = self.decoder(tgt_in, memory, src_mask, rows=rows)               # [B, T, d]
        scored = real.flatten().nonzero().squeeze(1)                             # [N]
        logits = self.generator.proj(hidden.flatten(0, 1).index_select(0, scored))  # [N, V]
        return smoothed_cross_entropy(logits.float(), targets.flatten().index_select(0, scored),
                                      label_smoothing)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_logits: bool = False,
                targets: torch.Tensor | None = None, label_smoothing: float = 0.0) -> torch.Tensor:
        """Teacher-forced log-probabilities [B, T, V] (raw logits if `return_logits`).

        With `targets` it returns `loss(...)` instead, so the trainer's step goes through forward
        (which DistributedDataParallel needs to synchronise gradients).
        """
        if targets is not None:
            return self.loss(src, tgt_in, targets, label_smoothing)
        if return_logits:
            return self.logits(src, tgt_in)
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt_in, memory, src_mask))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
