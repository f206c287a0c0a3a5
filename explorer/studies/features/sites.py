"""Where the dictionaries sit, and the activations a dictionary is trained on, taken from the
checkpoint's own training pairs. Two kinds of site, each saying what its dictionary reads and what it
reconstructs:

- an FFN site, the FFN module's name ("encoder.layers.0.ffn", "decoder.layers.2.ffn"): the dictionary
  reads what the FFN reads (the residual stream, normalised first in a pre-norm model) and reconstructs
  what the FFN adds to the stream: a transcoder. The attribution graphs replace each FFN by its
  transcoder, and a transcoder's latents say what the FFN computes from what; sites(model) lists these
  only, "every FFN" as the graphs study means it.
- a residual-stream site, "encoder.layers.0.resid" ("decoder.layers.1.resid"): the stream after that
  layer (its resid_post capture point), read and reconstructed: a sparse autoencoder. What the last
  encoder layer writes is all the decoder's cross-attention reads of a source word, so an SAE there
  names what the decoder can know of it; an FFN's transcoder sees only the FFN's share of that stream
  (docs/FEATURES.md measures both). stream_sites(model) lists these, all_sites(model) both kinds.

Every hook on a site goes through hook(): one forward hook on the site's module, handed (what the
dictionary reads, the module's output) and returning the output to use or None; rows, steering,
splicing and readings are written once over it.

Rows are collected teacher-forced over training pairs (encoder sites: source pieces, through the
encoder alone; decoder sites: target positions the decoder reads), pad positions left out: pairs drawn
in a seeded random order until they hold `max_rows` positions, then `max_rows` of those drawn; held in
float32, so a site's rows take max_rows x (d_in + d_out) x 4 bytes (ROW_BYTES bounds that).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from explorer.data.batching import pad_batch
from explorer.data.encoded import encode_pairs

ROW_BYTES = 1 << 30        # at most 1 GiB of rows per site
BATCH_TOKENS = 8192        # padded positions per teacher-forced pass
KINDS = ("ffn", "resid")   # the site kinds, as the command's --sites names them ("all": both)
STREAM_MODULE = "resid_post"


class _Enough(Exception):
    """Raised by the recording hook: the pass has given what it was run for."""


@dataclass(frozen=True)
class SiteRows:
    site: str
    inputs: np.ndarray         # [N, d_in] float32: what the dictionary reads
    outputs: np.ndarray        # [N, d_out] float32: what it reconstructs (a stream site: the same array)


def kind(site: str) -> str:
    """"ffn" or "resid" by the name's last part (ValueError for any other name)."""
    last = site.rsplit(".", 1)[-1]
    if last not in KINDS:
        raise ValueError(f"{site!r} is not a dictionary site (an FFN, '...ffn', or a layer's stream, '...resid')")
    return last


def is_stream(site: str) -> bool:
    return kind(site) == "resid"


def sites(model) -> list[str]:
    """Every FFN site of the model, encoder layers first."""
    return [name for name, module in model.named_modules() if name.endswith(".ffn")]


def stream_sites(model) -> list[str]:
    """Every layer's residual-stream site (the stream after the layer), encoder layers first."""
    return [name[:-len(STREAM_MODULE)] + "resid" for name, _ in model.named_modules()
            if name.endswith("." + STREAM_MODULE) and name.count(".") == 3]


def all_sites(model, kinds: str = "all") -> list[str]:
    """The sites of `kinds` ("ffn", "resid" or "all": the FFNs, then the streams)."""
    if kinds not in (*KINDS, "all"):
        raise ValueError(f"site kinds are ffn, resid or all, not {kinds!r}")
    return (sites(model) if kinds != "resid" else []) + (stream_sites(model) if kinds != "ffn" else [])


def module(model, site: str) -> torch.nn.Module:
    """The module a site's hook sits on: the FFN itself, or the layer's resid_post capture point."""
    known = all_sites(model)
    if site not in known:
        raise ValueError(f"{site!r} is not a site of this model (its sites: {', '.join(known)})")
    name = site if kind(site) == "ffn" else site[:-len("resid")] + STREAM_MODULE
    return dict(model.named_modules())[name]


def ffn(model, site: str) -> torch.nn.Module:
    """An FFN site's module (ValueError for a stream site or an unknown name)."""
    if not site.endswith(".ffn") or site not in sites(model):
        raise ValueError(f"{site!r} is not an FFN site of this model (its sites: {', '.join(sites(model))})")
    return dict(model.named_modules())[site]


def hook(model, site: str, edit: Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None]):
    """A forward hook on the site: edit(what the dictionary reads [B, L, d], the module's output [B, L, d])
    returns the output to use (None: unchanged). An FFN site reads the FFN's input; a stream site reads the
    stream itself, its output. Returns the handle (remove it in `finally`)."""
    stream = is_stream(site)
    return module(model, site).register_forward_hook(
        lambda _module, args, output: edit(output if stream else args[0], output))


@torch.no_grad()
def site_inputs(model, site: str, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """What the dictionary at `site` reads for a padded batch, teacher-forced (encoder sites: the encoder
    alone), the pass stopped there (the layers after it and the output projection are not needed):
    [B, S or T, d_in] float32."""
    seen = {}

    def record(reads, _output):
        seen["x"] = reads.detach()
        raise _Enough()

    handle = hook(model, site, record)
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
    """The rows `site` reads and reconstructs over the training `pairs`, at most `max_rows` drawn evenly."""
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
    stream, d = is_stream(site), model.cfg.d_model
    module(model, site)                                                 # an unknown site is refused here
    if max_rows * (1 if stream else 2) * d * 4 > ROW_BYTES:
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

    def record(reads, output):
        seen["in"], seen["out"] = reads.detach(), output.detach()
        raise _Enough()                  # the layers after the site (and the output projection) are not needed

    pad, start, n = model.cfg.pad_id, 0, len(chosen)
    handle = hook(model, site, record)
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
                        if not stream:                          # a stream site reconstructs what it reads
                            outputs.append(seen["out"][j].index_select(0, where).float().numpy())  # [k, d]
                start = end
    finally:
        handle.remove()
    read = np.concatenate(inputs)
    return SiteRows(site, read, read if stream else np.concatenate(outputs))
