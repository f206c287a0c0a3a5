"""The numbers behind the Positional-encoding page: tables, wavelengths, similarities, norms.

Kept out of the page and the plot builders so they can be tested against the model's own
`sinusoidal_table` (the page must show the table the model adds, not a re-derivation of it) and
reused by anything that wants to explain positions. Everything returns numpy, nothing here
touches Streamlit.
"""
from __future__ import annotations

import math

import numpy as np

from explorer.model.functional import sinusoid_frequencies, sinusoidal_table


def sinusoidal(n_positions: int, d_model: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """The model's own sinusoidal table, [n_positions, d_model] float32 (layout as ModelConfig.pe_layout)."""
    if n_positions < 1 or d_model < 2:
        raise ValueError(f"need n_positions >= 1 and d_model >= 2, got {n_positions} and {d_model}")
    if base <= 1:
        raise ValueError(f"base must be > 1, not {base}")
    return sinusoidal_table(n_positions, d_model, base, layout).numpy()       # [L, d]


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequency of each sin/cos pair i: 1 / base^(2i/d), the model's. [ceil(d/2)]"""
    return sinusoid_frequencies(d_model, base).numpy()                        # [ceil(d/2)]


def wavelengths(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Wavelength (in positions) of each pair i: 2*pi * base^(2i/d), from 2*pi up to ~2*pi*base."""
    return 2 * math.pi / frequencies(d_model, base)                          # [ceil(d/2)]


def dimension_wavelengths(d_model: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """Wavelength of every dimension [d_model]: interleaved, dims 2i and 2i+1 share pair i's; halves,
    dim i (a sine) and dim ceil(d/2) + i (its cosine) do."""
    waves = wavelengths(d_model, base)                                         # [ceil(d/2)]
    if layout == "halves":
        return np.concatenate([waves, waves[: d_model // 2]])
    return np.repeat(waves, 2)[:d_model]


def similarity(table: np.ndarray) -> np.ndarray:
    """PE(i) . PE(j) for all pairs of rows: [L, d] -> [L, L].

    For the sinusoidal table this is sum_i cos(w_i (i - j)): it depends only on the offset i - j,
    which is the relative-position structure the paper hoped attention could use.
    """
    table = np.asarray(table, dtype=np.float64)
    return table @ table.T                                                     # [L, L]


def offset_profile(d_model: int, base: float, max_offset: int) -> np.ndarray:
    """PE(p) . PE(p + k) for k = 0..max_offset: sum_i cos(k w_i), the same for every p. [max_offset + 1]

    Only exact for an even d_model (an odd one has a last sine without its cosine).
    """
    if d_model % 2:
        raise ValueError(f"the offset profile needs an even d_model, not {d_model}")
    k = np.arange(max_offset + 1, dtype=np.float64)[:, None]                  # [K, 1]
    w = frequencies(d_model, base)[None, :]                                    # [1, d/2]
    return np.cos(k * w).sum(axis=1)                                           # [K]


def learned_table(model, stack: str = "encoder") -> np.ndarray | None:
    """The learned position table of one stack [max_len, d], or None if the model uses sinusoids."""
    embed = getattr(model, stack).embed
    if not getattr(embed, "learned", False):
        return None
    return embed.position_table.weight.detach().float().cpu().numpy().copy()  # [max_len, d]


def embedding_norms(trace, stack: str = "encoder") -> tuple[np.ndarray, np.ndarray]:
    """L2 norms per position of the scaled token embedding and of the positional encoding added.

    Reads the capture points `<stack>.embed.tokens` (sqrt(d) * E[x], [1, T, d]) and
    `<stack>.embed.positions` ([1, T, d]) of an explorer.inspection.trace.Trace: (token_norms [T], pos_norms [T]).
    """
    tokens = np.asarray(trace[f"{stack}.embed.tokens"])[0]                    # [T, d]
    positions = np.asarray(trace[f"{stack}.embed.positions"])[0]              # [T, d]
    return np.linalg.norm(tokens, axis=-1), np.linalg.norm(positions, axis=-1)
