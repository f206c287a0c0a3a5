"""Shared by the attribution-graph tests: transcoders for a model's every FFN, random or trained for a few
steps (a graph is exact with any transcoder: its error nodes hold what the transcoder misses), and the
replacement model of one step of a tiny model."""
from __future__ import annotations

import numpy as np
import torch

from explorer.studies.features.transcoder import TopKTranscoder, TrainSettings, train
from explorer.studies.graphs.replacement import Replacement, Step, ffn_sites

STEP = Step(src=(5, 6, 7, 8, 9, 2), prefix=(1, 13, 14, 15), token=16)       # the tiny models' ids (EOS 2, BOS 1)


def random_transcoders(model, width: int = 128, k: int = 8, seed: int = 0) -> dict[str, TopKTranscoder]:
    """A random TopK skip transcoder per FFN site, scaled so that most of the k latents fire."""
    gen = torch.Generator().manual_seed(seed)
    d = model.cfg.d_model
    made = {}
    for site in ffn_sites(model):
        tc = TopKTranscoder(d, width, d, k)
        with torch.no_grad():
            for p in tc.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) / d ** 0.5)
        made[site] = tc
    return made


def briefly_trained(model, step: Step = STEP, width: int = 64, k: int = 4,
                    steps: int = 30) -> dict[str, TopKTranscoder]:
    """A transcoder per site trained for a few steps on the rows of the step's own sentence (repeated)."""
    rep = Replacement(model, random_transcoders(model, width, k), step)
    out = {}
    for site in rep.sites:
        x = rep.ffn_in[site].detach().float().numpy()                                   # [L, d]
        y = (rep.errors[site] + rep.transcoders[site](rep.ffn_in[site])).detach().float().numpy()
        rows = np.repeat(x, 8, 0), np.repeat(y, 8, 0)
        out[site] = train(*rows, TrainSettings(width=width, k=k, steps=steps, batch=16))
    return out
