"""A feature across the checkpoints of its training run: how strongly it fires at its top training
contexts in each saved checkpoint, read by the dictionary trained for one checkpoint (the one open).

What the numbers mean: the dictionary's encoder is applied to what each checkpoint's site holds (the FFN
input, or the stream)
(the same sentences, teacher-forced on their training translations, the same pieces). At the dictionary's
own checkpoint this is the feature's activation (the contexts' stored values); at an earlier one it says
how much of what this feature reads the earlier checkpoint already carried, not what the earlier model's
own features were (an earlier checkpoint's residual stream is another basis: a dictionary is trained for
one set of weights). Checkpoints whose tokenizer differs cannot read the same pieces and are refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.data.batching import pad_batch
from explorer.data.encoded import encode_pairs
from explorer.studies.features.sites import site_inputs


class OtherTokenizer(ValueError):
    """A checkpoint of the run reads other pieces: the contexts' positions mean nothing there."""


@dataclass(frozen=True)
class OverTraining:
    site: str
    feature: int
    labels: list[str]            # one per checkpoint, in the run's order (its step, or its name)
    values: np.ndarray           # [checkpoints, contexts] float32: the activation at each context


@torch.no_grad()
def activation_over_training(tokenizer, tc, site: str, feature: int, pairs: Sequence,
                             contexts: Sequence[tuple[int, int, float]], run: Sequence[tuple]) -> OverTraining:
    """The feature's activation at each context (pair, position, activation) of `pairs` in each checkpoint
    of `run` ((label, model, tokenizer) in training order): values [len(run), len(contexts)]. `tokenizer` is
    the dictionary's own checkpoint's (the contexts' positions count its pieces); a checkpoint whose
    tokenizer reads other pieces is refused (OtherTokenizer, one line)."""
    if not run:
        raise ValueError("at least one checkpoint")
    if not 0 <= feature < tc.width:
        raise ValueError(f"feature {feature} is not in 0..{tc.width - 1}")
    labels = [str(label) for label, _, _ in run]
    values = np.zeros((len(run), len(contexts)), np.float32)
    if not contexts:
        return OverTraining(site, feature, labels, values)
    reference = tokenizer.model_bytes()
    for label, _, tok in run:
        if tok.model_bytes() != reference:
            raise OtherTokenizer(f"checkpoint {label} reads other pieces (its tokenizer differs), so what its site "
                                 "reads at the contexts' positions cannot be compared")
    cfg = run[0][1].cfg                                  # one run: one config, one tokenizer (checked above)
    encoded = encode_pairs(tokenizer, [pairs[p] for p, _, _ in contexts], cfg.max_len, cfg.special)
    src = pad_batch([list(s) for s in encoded.src], cfg.pad_id)                              # [B, S]
    tgt_in = pad_batch([list(t[:-1]) for t in encoded.tgt], cfg.pad_id)                      # [B, T]
    where = torch.tensor([q for _, q, _ in contexts])                                        # [B]
    for row, (_, model, _) in enumerate(run):
        x = site_inputs(model, site, src, tgt_in)                                             # [B, L, d]
        if (where >= x.shape[1]).any():
            raise ValueError("a context's position lies beyond its pair (contexts built for another tokenizer?)")
        picked = x[torch.arange(len(contexts)), where]                                       # [B, d]
        values[row] = tc.encode(picked)[:, feature].numpy()                                  # [B]
    return OverTraining(site, feature, labels, values)
