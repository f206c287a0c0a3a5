"""Where the dictionaries sit: each layer's FFN, read as a map from its input to its output (a
transcoder's job), and the activations a dictionary is trained on, taken from the checkpoint's own
training pairs.

A site is the FFN module's name ("encoder.layers.0.ffn", "decoder.layers.2.ffn"): its input is what
the FFN reads (the residual stream, normalised first in a pre-norm model), its output what it adds to
the stream. Transcoders, not sparse autoencoders on the stream: the attribution graphs that follow
replace each FFN by its transcoder, and a transcoder's latents say what the FFN computes from what.

Rows are collected teacher-forced over training pairs (encoder sites: source pieces, through the
encoder alone; decoder sites: target positions the decoder reads), pad positions left out: pairs drawn
in a seeded random order until they hold `max_rows` positions, then `max_rows` of those drawn; held in
float32, so a site's rows take max_rows x (d_in + d_out) x 4 bytes (ROW_BYTES bounds that).
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


class _Enough(Exception):
    """Raised by the recording hook: the pass has given what it was run for."""


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


@torch.no_grad()
def ffn_inputs(model, site: str, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """The FFN input at `site` for a padded batch, teacher-forced (encoder sites: the encoder alone), the
    pass stopped once the FFN has read it (the layers after it and the output projection are not needed):
    [B, S or T, d_in] float32."""
    seen = {}

    def record(_module, args):
        seen["x"] = args[0].detach()
        raise _Enough()

    handle = ffn(model, site).register_forward_pre_hook(record)
    try:
        if site.startswith("encoder."):
            model.encode(src)
        else:
            model.logits(src, tgt_in)
    except _Enough:
        pass
    finally:
        handle.remove()
    return seen["x"].float()


def collect(model, tokenizer, pairs: Sequence, site: str, max_rows: int, seed: int = 0) -> SiteRows:
    """The FFN input and output rows of `site` over the training `pairs`, at most `max_rows` drawn evenly."""
    encoded = encode_pairs(tokenizer, pairs, model.cfg.max_len, model.cfg.special)
    return _collect(model, encoded.src, [t[:-1] for t in encoded.tgt], site, max_rows, seed)


def collect_sentences(model, sents, site: str, max_rows: int, seed: int = 0) -> SiteRows:
    """The same rows over a SentenceSet (explorer.studies.common.sentences): its sources, and the decoder
    reading the start id and its forced outputs."""
    start = model.cfg.special.start
    return _collect(model, sents.src, [[start] + list(out[:-1]) for out in sents.out], site, max_rows, seed)


def every_row(model, src_rows: Sequence[Sequence[int]], tgt_in_rows: Sequence[Sequence[int]], site: str) -> SiteRows:
    """Every position's rows, sentence after sentence in the order given, positions in order."""
    lengths = [len(s) for s in src_rows] if site.startswith("encoder.") else [len(t) for t in tgt_in_rows]
    return _collect(model, src_rows, tgt_in_rows, site, sum(lengths), seed=0)     # all drawn: every row kept


def _collect(model, src_rows: Sequence[Sequence[int]], tgt_in_rows: Sequence[Sequence[int]], site: str,
             max_rows: int, seed: int) -> SiteRows:
    """Sentences drawn in a seeded random order until they hold max_rows positions, passed through the
    model, and max_rows of their positions drawn: no pass over sentences that give no row."""
    module, d = ffn(model, site), model.cfg.d_model
    if max_rows * 2 * d * 4 > ROW_BYTES:
        raise ValueError(f"{max_rows:,} rows of width {d} exceed {ROW_BYTES:,} bytes")
    encoder_side = site.startswith("encoder.")
    lengths = np.array([len(s) for s in src_rows] if encoder_side else [len(t) for t in tgt_in_rows], dtype=np.int64)
    if lengths.sum() == 0:
        raise ValueError("no tokens to collect rows from")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    enough = int(np.searchsorted(np.cumsum(lengths[order]), max_rows)) + 1
    chosen = np.sort(order[:enough])                                    # the sentences passed, in file order
    first = np.concatenate([[0], np.cumsum(lengths[chosen])])
    keep = np.zeros(int(first[-1]), dtype=bool)
    keep[rng.choice(len(keep), min(max_rows, len(keep)), replace=False)] = True
    inputs, outputs, seen = [], [], {}

    def record(_module, args, output):
        seen["in"], seen["out"] = args[0].detach(), output.detach()
        raise _Enough()                  # the layers after the site (and the output projection) are not needed

    pad, start, n = model.cfg.pad_id, 0, len(chosen)
    handle = module.register_forward_hook(record)
    try:
        with torch.inference_mode():
            while start < n:
                end = start + 1
                while end < n and (end + 1 - start) * int(lengths[chosen[start:end + 1]].max()) <= BATCH_TOKENS:
                    end += 1
                rows = [int(i) for i in chosen[start:end]]
                src = pad_batch([list(src_rows[i]) for i in rows], pad)                        # [B, S]
                try:
                    if encoder_side:
                        model.encode(src)               # the encoder's sites need no decoder pass
                    else:
                        model(src, pad_batch([list(tgt_in_rows[i]) for i in rows], pad))      # tgt_in [B, T]
                except _Enough:
                    pass
                for j in range(len(rows)):
                    mask = keep[first[start + j]:first[start + j + 1]]                          # [L]
                    if mask.any():
                        where = torch.from_numpy(np.flatnonzero(mask))
                        inputs.append(seen["in"][j].index_select(0, where).float().numpy())   # [k, d]
                        outputs.append(seen["out"][j].index_select(0, where).float().numpy())  # [k, d]
                start = end
    finally:
        handle.remove()
    return SiteRows(site, np.concatenate(inputs), np.concatenate(outputs))
