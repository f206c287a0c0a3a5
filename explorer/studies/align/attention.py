"""Cross-attention as a word aligner: every head, each layer's mean, the mean of all, raw or
weighted by the norm of what each source position sends.

Which decoder row speaks for a target word (OFFSETS):
* "naive": the row where the word is *predicted* (decoder input = the previous word). This is what
  the Attention page draws, and it aligns poorly: the decoder is already looking ahead.
* "shift": Shift-Att (Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine
  Translation"): the row where the word is the decoder's *input*, one step later. Needs no training.

Value-norm weighting (Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing Transformers
with Vector Norms"): head h's output is sum_j alpha_hj f_h(x_j) with f_h(x) = (x W_V^h + b_V^h) W_O^h,
the source vector's share after the head's value and output projections. Weighting by ||f_h(x_j)||
scores a source position by how much it actually moves the output, not by how much it is looked at.
Per head that is alpha_hj ||f_h(x_j)||; per layer it is ||sum_h alpha_hj f_h(x_j)|| (the heads'
contributions added as vectors, as the layer adds them).

Every matrix is word level [target words, source words] (attention_stats.word_matrix: target pieces'
rows averaged, source pieces' columns summed); the source EOS belongs to no word and is left out.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from explorer.studies.align.pairs import ModelPair
from explorer.decoding.core import as_batch
from explorer.decoding.teacher import capture_forward
from explorer.inspection.attention_stats import word_matrix
from explorer.inspection.trace import attention_kind, attention_name
from explorer.runtime.modes import eval_mode

OFFSETS = {"naive": 0, "shift": 1}
METHODS = ("attention", "value-norm")   # per head; each also as a layer aggregate and over all layers
Key = tuple[str, str, int | None, int | None]   # (method, offset, layer, head), 0-based; None = aggregated


def cross_weights(model, mp: ModelPair) -> np.ndarray:
    """Teacher-forced cross-attention of one pair: [L, H, T, S] (T = out_ids incl. EOS, S = src_ids)."""
    kind = attention_kind("cross")
    n_layers = kind.n_layers(model.cfg)
    trace, _ = capture_forward(model, mp.src_ids, mp.out_ids, [kind.capture_name(l) for l in range(n_layers)])
    return np.stack([trace[attention_name("cross", l)][0] for l in range(n_layers)])   # [L, H, T, S]


@torch.inference_mode()
def value_vectors(model, mp: ModelPair) -> np.ndarray:
    """f_h(x_j) for every cross-attention layer: [L, H, S, d], x_j = the encoder output (the memory
    every cross-attention layer reads)."""
    with eval_mode(model):
        src, _ = as_batch([mp.src_ids], model)                               # [1, S]
        memory, _ = model.encode(src)                                        # [1, S, d]
        out = []
        for layer in model.decoder.layers:
            attn = layer.cross_attn
            h, dh = attn.n_heads, attn.d_head
            v = attn.w_v(memory[0]).view(-1, h, dh)                          # [S, H, dh]
            w_o = attn.w_o.weight.view(-1, h, dh)                            # [d, H, dh]
            out.append(torch.einsum("shk,dhk->hsd", v, w_o))                 # [H, S, d]
    return torch.stack(out).float().cpu().numpy()                            # [L, H, S, d]


def _rows(groups: list[list[int]], offset: int) -> list[list[int]]:
    return [[k + offset for k in g] for g in groups]


def attention_matrices(model, mp: ModelPair) -> Iterator[tuple[Key, np.ndarray]]:
    """(key, word matrix [target words, source words]) for every attention-based aligner."""
    weights = cross_weights(model, mp)                                       # [L, H, T, S]
    vectors = value_vectors(model, mp)                                       # [L, H, S, d]
    norms = np.linalg.norm(vectors, axis=-1)                                 # [L, H, S]
    n_layers, n_heads = weights.shape[:2]
    for offset, shift in OFFSETS.items():
        rows = _rows(mp.tgt_groups, shift)

        def words(m: np.ndarray) -> np.ndarray:
            return word_matrix(m, rows, mp.src_groups)                       # [Tw, Sw]

        for layer in range(n_layers):
            w = weights[layer]                                               # [H, T, S]
            weighted = w * norms[layer][:, None, :]                          # [H, T, S]
            for head in range(n_heads):
                yield ("attention", offset, layer, head), words(w[head])
                yield ("value-norm", offset, layer, head), words(weighted[head])
            yield ("attention", offset, layer, None), words(w.mean(axis=0))
            summed = np.einsum("hts,hsd->tsd", w, vectors[layer])            # [T, S, d]
            yield ("value-norm", offset, layer, None), words(np.linalg.norm(summed, axis=-1))
        yield ("attention", offset, None, None), words(weights.mean(axis=(0, 1)))
        yield ("value-norm", offset, None, None), words(weighted_all(weights, norms))


def weighted_all(weights: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Mean over layers and heads of alpha_hj ||f_h(x_j)||: [L, H, T, S], [L, H, S] -> [T, S]."""
    return (weights * norms[:, :, None, :]).mean(axis=(0, 1))
