"""Activation patching on one minimal pair: the clean and corrupted runs and batches of patched runs
(Vig et al., "Investigating Gender Bias in Language Models Using Causal Mediation Analysis", NeurIPS
2020; Meng et al., "Locating and Editing Factual Associations in GPT", NeurIPS 2022; Heimersheim and
Nanda, "How to use and interpret activation patching", arXiv 2404.15255, 2024).

Each run is one teacher-forced forward: the source, then the decoder reading the start id + the
output both translations share (pair.prefix), scored at the position where they part by the logit
difference LD = log p(clean token) - log p(corrupted token), computed as the difference of the two
logits (the softmax's normaliser cancels), in the model's own precision: no log-softmax over the
vocabulary, which the generator computes in float32 even for a float64 model.

A cell patches one activation: a capture point at some positions (the residual stream) or heads (an
attention kind's per-head `context`), taken from the other run. Denoising runs the corrupted source
with clean activations patched in; noising runs the clean source with corrupted ones. Both are
reported so that 0 = the patch does nothing and 1 = it does everything:
    denoising  (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt)   the share of the difference restored
    noising    (LD_clean - LD_patched) / (LD_clean - LD_corrupt)     the share destroyed
Patching a whole layer of the residual stream (every position) is the other run from there on, so it
gives exactly 1; patching nothing gives 0.

Cells run in batches, one row each, through intervene() edits that pick, per row, the source run's
tensor where that row patches and its own elsewhere (torch.where on a row x position/head mask).
Cells on the decoder side reuse the unpatched encoder memory, and every run projects only the
scored position onto the vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from explorer.decoding.core import Decoded, as_batch, decoding_session, special_ids
from explorer.decoding.greedy import greedy_search
from explorer.inspection.hooks import intervene
from explorer.inspection.trace import ATTENTION_KINDS
from explorer.studies.common.kept import decoder_outputs, encoder_outputs, kept
from explorer.studies.patching.pair import PAIR_DECODING, MinimalPair

DIRECTIONS = ("denoise", "noise")
ROWS_PER_BATCH = 32             # patched runs computed together (one row each): memory is rows x one run's


@dataclass(frozen=True)
class Cell:
    """One patch: `point` (a capture name) at `index` (positions for the residual stream, heads for a
    `context` point; None = all of them)."""

    point: str
    index: tuple[int, ...] | None = None


def patch_points(model: nn.Module) -> list[str]:
    """Every capture point a cell may patch: the residual streams (embeddings and each layer's output)
    and each attention kind's per-head context."""
    heads = [kind.capture_name(layer, "context") for kind in ATTENTION_KINDS.values()
             for layer in range(kind.n_layers(model.cfg))]
    return encoder_outputs(model) + decoder_outputs(model)[1:] + heads


def scored(model: nn.Module, tgt_in: torch.Tensor, memory: torch.Tensor, clean_token: int,
           corrupt_token: int) -> torch.Tensor:
    """LD = logit(clean token) - logit(corrupted token) at the last position of `tgt_in` [1, T], for each row
    of encoder memories [N, S, d] of sources with no padding: [N]."""
    hidden = model.decode(tgt_in.expand(memory.shape[0], -1), memory, None)                 # [N, T, d]
    logits = model.generator.proj(hidden[:, -1])                                              # [N, V]
    return logits[:, clean_token] - logits[:, corrupt_token]                                  # [N]


def logit_gap(model: nn.Module, clean_src: Sequence[int], corrupt_src: Sequence[int], prefix: Sequence[int],
              clean_token: int, corrupt_token: int) -> float:
    """LD_clean - LD_corrupt, the difference every cell is divided by (PairRuns.difference), from one forward of
    both sources (as many pieces each) without keeping any activation: what a suggested swap is ranked by."""
    with decoding_session(model):
        src = as_batch([list(clean_src), list(corrupt_src)], model)[0]                        # [2, S]
        tgt_in = torch.tensor([[special_ids(model).start, *prefix]], device=src.device)      # [1, T]
        ld = scored(model, tgt_in, model.encode(src)[0], clean_token, corrupt_token)           # [2]
    return float(ld[0] - ld[1])


class PairRuns:
    """The clean and corrupted runs of one pair, kept, and patched runs measured against them."""

    def __init__(self, model: nn.Module, pair: MinimalPair):
        self.model, self.pair = model, pair
        self.points = patch_points(model)
        with decoding_session(model):
            self.src = {"clean": as_batch([pair.clean_src], model)[0], "corrupt": as_batch([pair.corrupt_src], model)[0]}
            start = special_ids(model).start
            self.tgt_in = torch.tensor([[start] + pair.prefix], device=self.src["clean"].device)   # [1, T]
            self.acts, self.memory, self.ld = {}, {}, {}
            for side, src in self.src.items():
                with kept(model, self.points) as found:
                    self.memory[side] = model.encode(src)[0]                   # [1, S, d]
                    self.ld[side] = float(self._scored(self.memory[side])[0])
                self.acts[side] = dict(found)
        self.difference = self.ld["clean"] - self.ld["corrupt"]
        if not self.difference > 1e-6:
            raise ValueError(f"the clean and corrupted runs score the two tokens alike (logit difference "
                             f"{self.difference:.2g}): nothing to restore")

    def _scored(self, memory: torch.Tensor) -> torch.Tensor:
        """LD of each row [N] from encoder memories [N, S, d] (the scored position only)."""
        return scored(self.model, self.tgt_in, memory, self.pair.clean_token, self.pair.corrupt_token)

    def axis_size(self, point: str) -> int:
        """How many positions (residual stream) or heads (context) a point's patch index ranges over."""
        return self.acts["clean"][point].shape[1]

    def check(self, cell: Cell) -> Cell:
        if cell.point not in self.acts["clean"]:
            raise ValueError(f"{cell.point!r} cannot be patched; choose one of {', '.join(self.points[:4])}, ...")
        size = self.axis_size(cell.point)
        if cell.index is not None and (not cell.index or any(not 0 <= i < size for i in cell.index)):
            raise ValueError(f"{cell.point} indices must be in [0, {size - 1}], not {list(cell.index)}")
        return cell

    def normalised(self, cells: Sequence[Cell], direction: str = "denoise") -> np.ndarray:
        """Each cell's patched run, normalised (module docstring): [len(cells)] float64."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
        raw = self.logit_differences(cells, direction)
        if direction == "denoise":
            return (raw - self.ld["corrupt"]) / self.difference
        return (self.ld["clean"] - raw) / self.difference

    def logit_differences(self, cells: Sequence[Cell], direction: str = "denoise") -> np.ndarray:
        """LD of each cell's patched run [len(cells)]: encoder-side cells first re-run the encoder,
        decoder-side ones reuse the run's own memory; ROWS_PER_BATCH rows at a time."""
        cells = [self.check(c) for c in cells]
        run, source = ("corrupt", "clean") if direction == "denoise" else ("clean", "corrupt")
        out = np.zeros(len(cells))
        for encoder_side in (True, False):
            rows = [i for i, c in enumerate(cells) if c.point.startswith("encoder.") == encoder_side]
            for first in range(0, len(rows), ROWS_PER_BATCH):
                chunk = rows[first:first + ROWS_PER_BATCH]
                out[chunk] = self._batch([cells[i] for i in chunk], run, source, encoder_side)
        return out

    def _batch(self, cells: list[Cell], run: str, source: str, encoder_side: bool) -> np.ndarray:
        n = len(cells)
        masks: dict[str, torch.Tensor] = {}
        device = self.tgt_in.device
        for row, cell in enumerate(cells):
            mask = masks.setdefault(cell.point, torch.zeros(n, self.axis_size(cell.point), dtype=torch.bool,
                                                            device=device))  # [N, A]
            mask[row, list(cell.index) if cell.index is not None else slice(None)] = True
        edits = {point: _swap(mask, self.acts[source][point]) for point, mask in masks.items()}
        with decoding_session(self.model), intervene(self.model, edits):
            if encoder_side:
                memory = self.model.encode(self.src[run].expand(n, -1))[0]                    # [N, S, d]
            else:
                memory = self.memory[run].expand(n, -1, -1)                                   # [N, S, d]
            return self._scored(memory).double().cpu().numpy()                                # [N]


    def translation(self, cell: Cell, direction: str = "denoise") -> Decoded:
        """The patched run's greedy translation (what a clicked cell shows): the run's source, the output
        forced to the shared prefix as in every patched run, then decoded freely by explorer.decoding.
        The patch applies to the first pass through its point only: the encoder's one pass, or the
        decoder's first step, which reads the start id + prefix at once (the positions a decoder cell
        patches); later decoder steps are unpatched, since the other run has no activations there."""
        cell = self.check(cell)
        run, source = ("corrupt", "clean") if direction == "denoise" else ("clean", "corrupt")
        mask = torch.zeros(1, self.axis_size(cell.point), dtype=torch.bool, device=self.tgt_in.device)  # [1, A]
        mask[0, list(cell.index) if cell.index is not None else slice(None)] = True
        swap, calls = _swap(mask, self.acts[source][cell.point]), []

        def first_pass_only(x: torch.Tensor) -> torch.Tensor:
            calls.append(1)
            return swap(x) if len(calls) == 1 else x
        with intervene(self.model, {cell.point: first_pass_only}):
            given, prefix = self.pair.prefix[:self.pair.given], self.pair.prefix[self.pair.given:]
            return greedy_search(self.model, self.src[run], PAIR_DECODING, prefix=prefix, given=given)[0]


def _swap(mask: torch.Tensor, patch: torch.Tensor):
    """The edit of one capture point: rows take `patch` [1, A, ...] where mask [N, A] says, else their own."""
    def edit(x: torch.Tensor) -> torch.Tensor:                                 # [N, A, ...]
        if x.shape[0] != mask.shape[0]:
            raise ValueError(f"patched batch of {x.shape[0]} rows, expected {mask.shape[0]}")
        where = mask.view(*mask.shape, *([1] * (x.dim() - 2)))                 # [N, A, 1, ...]
        return torch.where(where, patch, x)                                    # [N, A, ...]
    return edit
