"""What a head does, in numbers: summary statistics of attention maps and a word alignment.

Pure numpy, so the app, the JSON bundle and the tests all use the same definitions. An attention
map here is a row-stochastic matrix w[q, k] (each query's weights over the keys sum to 1); a
layer is [H, q, k]; a stack is [L, H, q, k].

Statistics per head (each the mean over query rows):
* entropy      -sum_k w log w, in nats: 0 = looks at one key, log(k) = spread evenly;
* max_weight   the largest weight of the row (how peaked);
* to_self      w[i, i], attention to the query's own position;
* to_prev      w[i, i-1], attention to the previous position (rows i >= 1);
* to_eos       w[i, e], attention to a sentence-boundary key e (the source's </s> for encoder and
               cross attention; the caller picks; NaN when there is none);
* diagonality  mass within one position of the (length-rescaled) diagonal, so a monotonic
               alignment scores near 1 even when source and target lengths differ.

The two shares are written once each as public helpers (offset_share: w[i, i+offset];
key_share: w[:, key]) so that other summaries (explorer.studies.heads: the next position, the rarest
token) use the same formulas. boundary_key is the 'to_eos' key convention.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.text.special import SPECIAL_PIECES, UNK_ID

STATS = ("entropy", "max_weight", "to_self", "to_prev", "to_eos", "diagonality")
STAT_LABELS = {
    "entropy": "entropy (nats)",
    "max_weight": "max weight",
    "to_self": "to own position",
    "to_prev": "to previous token",
    "to_eos": "to end-of-sentence",
    "diagonality": "diagonality",
}
WORD_MARK = "▁"                                # sentencepiece's word-start marker
SPECIAL, UNK = set(SPECIAL_PIECES), SPECIAL_PIECES[UNK_ID]


def _check(weights: np.ndarray, ndim: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != ndim:
        raise ValueError(f"expected a {ndim}-d attention array, got shape {w.shape}")
    if w.shape[-1] == 0 or w.shape[-2] == 0:
        raise ValueError(f"empty attention map of shape {w.shape}")
    return w


def offset_share(weights: np.ndarray, offset: int) -> float:
    """Mean of w[i, i + offset] over the query rows i whose key i + offset exists (offset -1: the
    previous position, 0: the query's own, +1: the next); NaN when no row has that key."""
    w = _check(weights, 2)                                                    # [q, k]
    q, k = w.shape
    rows = np.arange(max(0, -offset), min(q, k - offset))                     # rows with a key at i+offset
    return float(np.mean(w[rows, rows + offset])) if rows.size else float("nan")


def key_share(weights: np.ndarray, key: int | None) -> float:
    """Mean weight all query rows give one key (e.g. </s>, the rarest token); NaN for no key."""
    w = _check(weights, 2)                                                    # [q, k]
    k = w.shape[1]
    if key is None or not -k <= key < k:
        return float("nan")
    return float(np.mean(w[:, key]))


def boundary_key(keys: str, src_ids, eos_id: int) -> int | None:
    """The key of the 'to end-of-sentence' statistic: for target keys (decoder self-attention) the
    start token <s> at 0, all the decoder sees of a boundary; for source keys the source's final
    </s> (the model's own eos id), None when the source does not end with it."""
    if keys == "tgt":
        return 0
    src_ids = list(src_ids or [])
    return len(src_ids) - 1 if src_ids and int(src_ids[-1]) == eos_id else None


def head_stats(weights: np.ndarray, eos_index: int | None = None) -> dict[str, float]:
    """The statistics of one head's map w[q, k] (see the module docstring)."""
    w = _check(weights, 2)                                                    # [q, k]
    q, k = w.shape
    rows = np.arange(q)
    safe = np.where(w > 0, w, 1.0)
    entropy = float(np.mean(-(w * np.log(safe)).sum(axis=1)))
    to_self = offset_share(w, 0)
    to_prev = offset_share(w, -1)
    to_eos = key_share(w, eos_index)
    centre = rows * (k - 1) / max(q - 1, 1)                                   # [q] rescaled diagonal
    band = np.abs(np.arange(k)[None, :] - centre[:, None]) <= 1.0             # [q, k]
    diagonality = float(np.mean((w * band).sum(axis=1)))
    return {"entropy": entropy, "max_weight": float(np.mean(w.max(axis=1))), "to_self": to_self,
            "to_prev": to_prev, "to_eos": to_eos, "diagonality": diagonality}


def stack_stats(weights: np.ndarray, eos_index: int | None = None) -> dict[str, np.ndarray]:
    """Per-head statistics of a stack [L, H, q, k]: {stat name: array [L, H]}."""
    w = _check(weights, 4)                                                    # [L, H, q, k]
    n_layers, n_heads = w.shape[:2]
    out = {name: np.full((n_layers, n_heads), np.nan) for name in STATS}
    for layer in range(n_layers):
        for head in range(n_heads):
            for name, value in head_stats(w[layer, head], eos_index).items():
                out[name][layer, head] = value
    return out


def stats_rows(stats: dict[str, np.ndarray]) -> list[dict]:
    """{stat: [L, H]} -> one row per head with 1-based layer/head numbers (for a table or CSV)."""
    first = next(iter(stats.values()))
    rows = []
    for layer in range(first.shape[0]):
        for head in range(first.shape[1]):
            row = {"layer": layer + 1, "head": head + 1}
            row.update({name: float(values[layer, head]) for name, values in stats.items()})
            rows.append(row)
    return rows


# ---- word alignment from cross-attention --------------------------------------------------------

def piece_words(pieces: list[str]) -> list[list[int]]:
    """Group sentencepiece pieces into words: a word starts at a piece beginning with ▁, and each
    special token (<s>, </s>, <unk>) is a word of its own. Returns lists of piece indices."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        starts = piece.startswith(WORD_MARK) or piece in SPECIAL or not groups or pieces[i - 1] in SPECIAL
        if starts:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def word_text(pieces: list[str], group: list[int]) -> str:
    text = "".join(pieces[i] for i in group).replace(WORD_MARK, " ").strip()
    return text or pieces[group[0]]


def word_matrix(weights: np.ndarray, tgt_groups: list[list[int]], src_groups: list[list[int]]) -> np.ndarray:
    """Piece-level scores w[t, s] -> word level [target words, source words]: a target word's row is
    the mean of its pieces' rows, a source word's column the sum of its pieces' columns (attention
    mass is kept, so a word's row still reads as a distribution over source words)."""
    rows = np.stack([weights[g].mean(axis=0) for g in tgt_groups]) if tgt_groups \
        else np.zeros((0, weights.shape[1]))                                  # [Tw, S]
    return np.stack([rows[:, g].sum(axis=1) for g in src_groups], axis=1) if src_groups \
        else np.zeros((len(tgt_groups), 0))                                   # [Tw, Sw]


@dataclass(frozen=True)
class Alignment:
    """Word-level attention: matrix[t, s] = how much target word t attends to source word s."""

    matrix: np.ndarray                 # [target words, source words]; rows sum to <= 1
    tgt_words: list[str]
    src_words: list[str]
    links: list[tuple[int, int]]       # (target word, its most-attended source word)


def word_alignment(cross: np.ndarray, src_pieces: list[str], out_pieces: list[str],
                   drop_special: bool = True) -> Alignment:
    """Align words from one cross-attention map cross[t, s] (a head, or a mean over heads).

    Row t is the decoder position that produced out_pieces[t]. A target word's row is the mean of
    its pieces' rows (each a distribution); a source word's column is the sum of its pieces'
    columns (so mass is kept). With drop_special, </s> and <s> words are left out of both sides;
    the remaining rows then sum to less than 1 by what went to them.
    """
    w = _check(cross, 2)                                                      # [T, S]
    if w.shape != (len(out_pieces), len(src_pieces)):
        raise ValueError(f"cross-attention of shape {w.shape} does not match {len(out_pieces)} output "
                         f"and {len(src_pieces)} source pieces")
    src_groups = piece_words(src_pieces)
    tgt_groups = piece_words(out_pieces)
    if drop_special:
        src_groups = [g for g in src_groups if src_pieces[g[0]] not in SPECIAL or src_pieces[g[0]] == UNK]
        tgt_groups = [g for g in tgt_groups if out_pieces[g[0]] not in SPECIAL or out_pieces[g[0]] == UNK]
    matrix = word_matrix(w, tgt_groups, src_groups)                           # [Tw, Sw]
    links = [(t, int(np.argmax(matrix[t]))) for t in range(len(tgt_groups))] if src_groups else []
    return Alignment(matrix=matrix, tgt_words=[word_text(out_pieces, g) for g in tgt_groups],
                     src_words=[word_text(src_pieces, g) for g in src_groups], links=links)
