"""The patching grids of one minimal pair, and their average over a set of pairs.

Five grids, each in both directions (explorer.studies.patching.runs: denoising restores, noising destroys):
    encoder_resid   encoder depth (0 = embeddings .. L) x source position
    decoder_resid   decoder layer (1 .. L) x target position (decoder inputs: start id + shared prefix;
                    the last one is where the measured token is predicted). The decoder's embeddings
                    are left out: both runs read the same decoder input, so patching them does nothing.
    encoder_heads / decoder_heads / cross_heads   layer x head of each attention kind (a head's
                    context at every query position)
and `changed`: per encoder depth, the changed source positions patched together (where the swapped
word's information sits, layer by layer).
Over a set of pairs the grids are averaged cell by cell over the pairs that have the cell (sources
and prefixes differ in length; `count` says how many pairs each position column averages).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from torch import nn

from explorer.inspection.trace import ATTENTION_KINDS, KINDS
from explorer.studies.common.kept import encoder_outputs
from explorer.studies.patching.pair import MinimalPair
from explorer.studies.patching.runs import DIRECTIONS, Cell, PairRuns

GRIDS = ("encoder_resid", "decoder_resid", "encoder_heads", "decoder_heads", "cross_heads", "changed")


def grid_cells(model: nn.Module, pair: MinimalPair, grid: str) -> list[list[Cell]]:
    """The cells of one grid, row by row (see the module docstring)."""
    cfg = model.cfg
    if grid == "encoder_resid":
        return [[Cell(name, (s,)) for s in range(len(pair.clean_src))] for name in encoder_outputs(model)]
    if grid == "decoder_resid":
        return [[Cell(f"decoder.layers.{layer}.resid_post", (t,)) for t in range(pair.position + 1)]
                for layer in range(cfg.n_decoder_layers)]
    if grid == "changed":
        return [[Cell(name, tuple(pair.changed))] for name in encoder_outputs(model)]
    if grid.endswith("_heads") and grid[:-len("_heads")] in KINDS:
        kind = ATTENTION_KINDS[grid[:-len("_heads")]]
        return [[Cell(kind.capture_name(layer, "context"), (h,)) for h in range(cfg.n_heads)]
                for layer in range(kind.n_layers(cfg))]
    raise ValueError(f"grid must be one of {', '.join(GRIDS)}, not {grid!r}")


@dataclass
class PairGrids:
    """Every grid of one pair: grids[name][direction] is a [rows, columns] array of normalised values."""

    pair: MinimalPair
    logit_difference: dict[str, float]          # LD of the clean and corrupted runs ("clean", "corrupt")
    grids: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


def pair_grids(model: nn.Module, pair: MinimalPair, grids=GRIDS, directions=DIRECTIONS) -> PairGrids:
    """Patch every cell of the named grids, in each direction; all cells of a direction in one set of batches."""
    runs = PairRuns(model, pair)
    layouts = {name: grid_cells(model, pair, name) for name in grids}
    flat = [cell for name in grids for row in layouts[name] for cell in row]
    result = PairGrids(pair=pair, logit_difference=dict(runs.ld))
    for direction in directions:
        values, at = runs.normalised(flat, direction), 0
        for name in grids:
            rows, cols = len(layouts[name]), len(layouts[name][0])
            result.grids.setdefault(name, {})[direction] = values[at:at + rows * cols].reshape(rows, cols)
            at += rows * cols
    return result


def average(results: list[PairGrids]) -> dict[str, dict[str, dict]]:
    """Cell-by-cell means over pairs: {grid: {direction: {"mean": [rows][cols], "count": [cols]}}},
    columns as wide as the widest pair's (a pair lacking a position column does not count there)."""
    if not results:
        raise ValueError("no pairs to average")
    out: dict[str, dict[str, dict]] = {}
    for name, by_direction in results[0].grids.items():
        for direction in by_direction:
            arrays = [r.grids[name][direction] for r in results]
            rows, width = arrays[0].shape[0], max(a.shape[1] for a in arrays)
            total, count = np.zeros((rows, width)), np.zeros(width)
            for a in arrays:
                total[:, :a.shape[1]] += a
                count[:a.shape[1]] += 1
            out.setdefault(name, {})[direction] = {"mean": (total / np.maximum(count, 1)).tolist(),
                                                   "count": count.astype(int).tolist()}
    return out
