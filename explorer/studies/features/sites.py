"""Where the dictionaries sit: each layer's FFN, read as a map from its input to its output (a
transcoder's job), and the activations a dictionary is trained on, taken from the checkpoint's own
training pairs.

A site is the FFN module's name ("encoder.layers.0.ffn", "decoder.layers.2.ffn"): its input is what
the FFN reads (the residual stream, normalised first in a pre-norm model), its output what it adds to
the stream. Transcoders, not sparse autoencoders on the stream: the attribution graphs that follow
replace each FFN by its transcoder, and a transcoder's latents say what the FFN computes from what.

Rows are collected teacher-forced over training pairs (encoder sites: every source piece; decoder
sites: every target position the decoder reads), pad positions left out, and at most `max_rows` of
them kept, drawn evenly with a seed; held in float32, so a site's rows take max_rows x (d_in + d_out)
x 4 bytes (ROW_BYTES bounds that).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.data.batching import pad_batch
from explorer.data.encoded import encode_pairs

ROW_BYTES = 1 << 30        # at most 1 GiB of rows per site
BATCH_TOKENS = 8192        # padded positions per teacher-forced pass


@dataclass(frozen=True)
class SiteRows:
    site: str
    inputs: np.ndarray         # [N, d_in] float32: what the FFN read
    outputs: np.ndarray        # [N, d_out] float32: what it wrote


def sites(model) -> list[str]:
    """Every FFN site of the model, encoder layers first."""
    return [name for name, module in model.named_modules() if name.endswith(".ffn")]


def ffn(model, site: str) -> torch.nn.Module:
    found = dict(model.named_modules()).get(site)
    if found is None or not site.endswith(".ffn"):
        raise ValueError(f"{site!r} is not an FFN site of this model (its sites: {', '.join(sites(model))})")
    return found


def collect(model, tokenizer, pairs: Sequence, site: str, max_rows: int, seed: int = 0) -> SiteRows:
    """The FFN input and output rows of `site` over the training `pairs`, at most `max_rows` drawn evenly."""
    module, d = ffn(model, site), model.cfg.d_model
    if max_rows * 2 * d * 4 > ROW_BYTES:
        raise ValueError(f"{max_rows:,} rows of width {d} exceed {ROW_BYTES:,} bytes")
    encoded = encode_pairs(tokenizer, pairs, model.cfg.max_len, model.cfg.special)
    encoder_side = site.startswith("encoder.")
    lengths = [len(s) for s in encoded.src] if encoder_side else [len(t) - 1 for t in encoded.tgt]
    total = sum(lengths)
    keep = np.zeros(total, dtype=bool)
    keep[np.random.default_rng(seed).choice(total, min(max_rows, total), replace=False)] = True
    first = np.concatenate([[0], np.cumsum(lengths)])
    inputs, outputs, seen = [], [], {}

    def record(_module, args, output):
        seen["in"], seen["out"] = args[0].detach(), output.detach()

    pad, start = model.cfg.pad_id, 0
    handle = module.register_forward_hook(record)
    try:
        with torch.inference_mode():
            while start < len(pairs):
                end = start + 1
                while end < len(pairs) and (end + 1 - start) * max(lengths[start:end + 1]) <= BATCH_TOKENS:
                    end += 1
                rows = range(start, end)
                src = pad_batch([encoded.src[i] for i in rows], pad)                           # [B, S]
                tgt_in = pad_batch([encoded.tgt[i][:-1] for i in rows], pad)                   # [B, T]
                model(src, tgt_in)
                for j, i in enumerate(rows):
                    mask = keep[first[i]:first[i + 1]]                                           # [L]
                    if mask.any():
                        where = torch.from_numpy(np.flatnonzero(mask))
                        inputs.append(seen["in"][j].index_select(0, where).float().numpy())   # [k, d]
                        outputs.append(seen["out"][j].index_select(0, where).float().numpy())  # [k, d]
                start = end
    finally:
        handle.remove()
    return SiteRows(site, np.concatenate(inputs), np.concatenate(outputs))
