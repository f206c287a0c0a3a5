"""DecoderLens: what the decoder makes of each encoder layer (Langedijk, Mohebbi, Sarti, Zuidema and
Jumelet, "DecoderLens: Layerwise Interpretation of Encoder-Decoder Transformers", Findings of NAACL
2024; arXiv 2310.03686).

The decoder cross-attends the output of encoder layer k instead of the last one (k = 0: the
embeddings) and decodes as usual, greedy or beam: one whole translation per encoder layer, so
"what does layer 1 know that layer 3 does not?" is answered in words.

How it runs through the project's own decoders (explorer.decoding), without a second decoding loop:
the decoders encode the source themselves, so inside `memory_from()` the *last* encoder layer's
output (its `resid_post` capture point) is replaced by layer k's, kept a moment earlier in the same
encoder pass. Whatever the encoder does after its last layer then happens to layer k's output too:
* post-LN models (the paper's, the shipped ones, OPUS-MT): nothing; every layer's output already
  ends in a LayerNorm, and the embeddings (layer 0) are read as they are (scaled tokens + positions);
* pre-LN models: the encoder's final LayerNorm, applied to layer k as to the last layer; the paper
  applies the final LayerNorm the same way, since the decoder was only ever trained on normalised
  memory.
At k = last the edit is the identity, so the lens equals the normal translation (a test checks ids
and log-probs). The rows of all layers go through one batched decode: source row b of layer block i
is batch row i * B + b.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import Decoded, as_batch, special_ids
from explorer.decoding.translate import decode, encode_source, forced_target, pieces
from explorer.studies.common.sentences import GREEDY
from explorer.inspection.hooks import intervene
from explorer.studies.common.kept import encoder_outputs, layer_label

LENS_DECODING = GREEDY          # greedy, at most 1.5 x source + 10 tokens: a shallow layer that babbles stops there


def check_layers(model: nn.Module, layers: Sequence[int] | None) -> list[int]:
    """Encoder depths 0 (embeddings) .. n_encoder_layers; all of them when None; ValueError otherwise."""
    last = model.cfg.n_encoder_layers
    if layers is None:
        return list(range(last + 1))
    layers = [int(k) for k in layers]
    if not layers or any(not 0 <= k <= last for k in layers):
        raise ValueError(f"encoder layers must be in [0, {last}] (0 = the embeddings), not {layers}")
    return layers


@contextmanager
def memory_from(model: nn.Module, layers: Sequence[int], rows: int) -> Iterator[None]:
    """Inside the block, an encoder pass over len(layers) * rows rows hands the decoder, for rows
    i * rows .. (i + 1) * rows - 1, the output of encoder depth layers[i] (0 = embeddings) in place
    of the last layer's. Only the calling thread's encoder passes are edited."""
    layers = check_layers(model, layers)
    names = encoder_outputs(model)
    last = len(names) - 1
    found: dict[int, torch.Tensor] = {}

    def keep(depth: int):
        def edit(x: torch.Tensor) -> torch.Tensor:                            # [N, S, d]
            found[depth] = x
            return x
        return edit

    def swap(x: torch.Tensor) -> torch.Tensor:                                 # [N, S, d], the last layer's
        if x.shape[0] != len(layers) * rows:
            raise ValueError(f"memory_from expected {len(layers)} x {rows} rows, got {x.shape[0]}")
        blocks = [(x if k == last else found[k])[i * rows:(i + 1) * rows] for i, k in enumerate(layers)]
        return torch.cat(blocks)                                               # [N, S, d]

    edits = {names[k]: keep(k) for k in sorted(set(layers)) if k != last}
    edits[names[last]] = swap
    with intervene(model, edits):
        yield


def decoder_lens(model: nn.Module, src, cfg: DecodeConfig | None = None,
                 layers: Sequence[int] | None = None, *, given: Sequence[int] = ()) -> list[list[Decoded]]:
    """Decode each source (ids with EOS, ragged lists or [B, S]) from each encoder depth in `layers`
    (default all, embeddings first): result[i][b] is sentence b decoded from depth layers[i].

    One batched decode of len(layers) x B rows through explorer.decoding.decode (greedy, beam or
    sampling as cfg says); callers bound B (the test-set sweep goes a batch at a time). `given`: the
    tokens every output starts with (a multilingual model's target tag: translate.forced_target), so
    every depth writes in the language the model itself would."""
    layers = check_layers(model, layers)
    batch, _ = as_batch(src, model)                                            # [B, S]
    rows = batch.shape[0]
    with memory_from(model, layers, rows):
        decoded = decode(model, batch.repeat(len(layers), 1), cfg or LENS_DECODING, given=given)   # K*B results
    return [decoded[i * rows:(i + 1) * rows] for i in range(len(layers))]


@dataclass(frozen=True)
class LensTranslation:
    """The best translation of one sentence decoded from one encoder depth."""

    layer: int                      # 0 = embeddings, k = encoder layer k (1-based)
    label: str
    ids: list[int]                  # output ids, EOS included when finished
    pieces: list[str]
    text: str
    token_logprobs: list[float]
    score: float
    finished: bool


def lens_translations(model: nn.Module, tokenizer, text: str, cfg: DecodeConfig | None = None,
                      layers: Sequence[int] | None = None) -> list[LensTranslation]:
    """One text through the DecoderLens: a translation per encoder depth (the app's table); [] when
    the text gives nothing to translate (the translate preamble says why)."""
    layers = check_layers(model, layers)
    src_ids, _, _ = encode_source(tokenizer, text, model.cfg.max_len, special_ids(model))
    if not src_ids:
        return []
    out = []
    for k, (decoded,) in zip(layers, decoder_lens(model, [src_ids], cfg, layers,
                                                            given=forced_target(tokenizer))):
        best = decoded.best
        out.append(LensTranslation(layer=k, label=layer_label(k), ids=best.ids, pieces=pieces(tokenizer, best.ids, "tgt"),
                                   text=tokenizer.decode(best.output_ids, side="tgt"),
                                   token_logprobs=best.token_logprobs, score=best.score, finished=best.finished))
    return out
