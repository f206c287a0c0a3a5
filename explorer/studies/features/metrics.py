"""How good a dictionary is, on rows it was not trained on: the fraction of the target's variance it
explains (an FFN's output, or the stream an SAE reconstructs), how many latents are active per row, how
many never fire, how often the busiest fires; and, for a transcoder, what a least-squares linear map of
the same rows explains (the skip connection's share alone, and the floor a dictionary's latents add to;
for an SAE the identity would explain all, so it is not computed).

    FVE = 1 - sum ||y - y_hat||^2 / sum ||y - mean(y)||^2        (over the held-out rows)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from explorer.studies.features.transcoder import TopKTranscoder

CHUNK = 8192               # rows per pass (latents [CHUNK, m] float32 at a time)


@dataclass(frozen=True)
class Quality:
    fve: float                 # fraction of variance explained
    l0: float                  # mean active latents per row
    dead_fraction: float       # latents active on no row
    max_density: float         # the largest share of rows one latent is active on
    rows: int

    def to_json(self) -> dict:
        return asdict(self)


def _chunks(x: torch.Tensor):
    """(start, rows [n, d_in]) CHUNK rows at a time: latents [CHUNK, m] are the largest tensor held."""
    for start in range(0, len(x), CHUNK):
        yield start, x[start:start + CHUNK]


def quality(tc: TopKTranscoder, inputs: np.ndarray, outputs: np.ndarray) -> Quality:
    x, y = torch.from_numpy(inputs).float(), torch.from_numpy(outputs).float()      # [N, d_in], [N, d_out]
    sse, active, l0 = 0.0, torch.zeros(tc.width), 0.0
    with torch.no_grad():
        for start, rows in _chunks(x):                                                  # [n, d_in]
            z = tc.encode(rows)                                                        # [n, m]
            sse += float(((tc.decode(z) + tc.skip(rows) - y[start:start + len(rows)]) ** 2).sum())
            on = z > 0
            active += on.sum(0)
            l0 += float(on.sum())
    sst = float(((y - y.mean(0)) ** 2).sum())
    n = max(len(x), 1)
    return Quality(fve=1.0 - sse / max(sst, 1e-12), l0=l0 / n, dead_fraction=float((active == 0).float().mean()),
                   max_density=float(active.max()) / n, rows=len(x))


def busiest_share(encode, inputs: np.ndarray) -> float:
    """The largest share of rows [N, d_in] one latent of encode (rows -> latents [n, m]) is active on:
    quality's max_density without the decoding (what the transcoder's training looks at part way)."""
    x = torch.from_numpy(inputs).float()                                                # [N, d_in]
    with torch.no_grad():
        active = sum((encode(rows) > 0).sum(0) for _, rows in _chunks(x))               # [m], or 0 for no rows
    return float(torch.as_tensor(active).max()) / max(len(x), 1)


def linear_fve(inputs: np.ndarray, outputs: np.ndarray, held_inputs: np.ndarray, held_outputs: np.ndarray) -> float:
    """The held-out FVE of the least-squares affine map fitted on (inputs, outputs)."""
    design = np.c_[inputs, np.ones(len(inputs), dtype=inputs.dtype)]                     # [N, d_in + 1]
    weights, *_ = np.linalg.lstsq(design.astype(np.float64), outputs.astype(np.float64), rcond=None)
    guess = np.c_[held_inputs, np.ones(len(held_inputs))] @ weights                      # [M, d_out]
    sst = ((held_outputs - held_outputs.mean(0)) ** 2).sum()
    return float(1.0 - ((guess - held_outputs) ** 2).sum() / max(sst, 1e-12))
