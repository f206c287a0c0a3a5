"""Contrastive attribution at one step of decoding (Yin & Neubig 2022, "Interpreting Language Models
with Contrastive Explanations", EMNLP): which inputs made the model write the chosen token rather
than the foil.

At a step (source x, target prefix y_<t), the contrast is F(e) = log p(chosen) - log p(foil) as a
function of the input token vectors e: the source's (encoder.embed.tokens) and the decoder inputs'
(decoder.embed.tokens: the start id and the prefix), both the scaled embeddings before positions are
added, replaced through hooks.intervene. The difference of two log-probs is the difference of their
logits (the softmax's normaliser cancels), so the contrast sees only what separates the two tokens;
the plain attribution of log p(chosen), computed beside it, also carries everything that moves the
normaliser, which is why the two differ. Methods, through captum as explorer.studies.align.attribution uses it:
* gradient x input: e * dF/de (the paper's contrastive gradient x input);
* integrated gradients (Sundararajan et al. 2017): zero token vectors as the baseline (positions kept).
  Completeness: the attributions sum to F(e) - F(0), the difference of the two log-prob differences
  between input and baseline; reported as `delta` (captum's convergence delta) and checked in the tests.
An input's attribution is the sum over its d components (signed). The contrast and the plain function
are two rows of one captum call (a per-row weight of the foil's log-prob: 1 or 0), in batches bounded
in bytes by explorer.studies.align.attribution's ATTRIBUTION_BYTES / rows_per_batch, in the compute queue.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.studies.common.gradients import ATTRIBUTION_BYTES, ATTRIBUTIONS, IG_STEPS, TOKENS, rows_per_batch
from explorer.studies.contrastive.foils import check_step
from explorer.decoding.core import as_batch, special_ids
from explorer.inspection.hooks import intervene
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import match_threads
from explorer.runtime.modes import eval_mode

TARGET_TOKENS = "decoder.embed.tokens"
MAX_IG_STEPS = 512


@dataclass(frozen=True)
class Attribution:
    """One function's attribution: per source piece (EOS included) and per decoder input (start id +
    prefix), with the function at the input and at the baseline."""

    source: np.ndarray               # [S]
    target: np.ndarray               # [P + 1]
    value: float                     # F(e)
    baseline: float                  # F(0) (integrated gradients; F(e) for gradient x input)
    delta: float | None              # sum of attributions - (F(e) - F(0)); None for gradient x input

    @property
    def total(self) -> float:
        return float(self.source.sum() + self.target.sum())

    @property
    def completeness_error(self) -> float | None:
        """|delta| relative to |F(e) - F(0)|: 0 when the attributions add up exactly."""
        if self.delta is None:
            return None
        return abs(self.delta) / max(abs(self.value - self.baseline), 1e-12)


@dataclass(frozen=True)
class StepContrast:
    """Why `chosen` and not `foil` at one step, by one method, beside the plain attribution of `chosen`."""

    method: str
    chosen: int
    foil: int
    chosen_logprob: float
    foil_logprob: float
    contrast: Attribution            # F = log p(chosen) - log p(foil)
    plain: Attribution | None        # F = log p(chosen) (None when not asked for)
    steps: int                       # integrated gradients' points (0 for gradient x input)


def _function(model, src_ids: Sequence[int], prefix: list[int], chosen: int, foil: int):
    """(F, source vectors [1, S, d], target vectors [1, T, d]); F(src [B, S, d], tgt [B, T, d], weight [B])
    = log p(chosen) - weight * log p(foil) at the position after the prefix [B]."""
    src, _ = as_batch([list(src_ids)], model)                                   # [1, S]
    tgt_in = torch.tensor([[special_ids(model).start] + prefix], dtype=torch.long, device=src.device)  # [1, T]
    enc, dec = model.encoder.embed, model.decoder.embed
    with torch.no_grad():
        src_vectors = enc.token_vectors(src).detach()                    # [1, S, d]
        tgt_vectors = dec.token_vectors(tgt_in).detach()                 # [1, T, d]

    def forward(source: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        b = source.shape[0]
        with intervene(model, {TOKENS: lambda _: source, TARGET_TOKENS: lambda _: target}):
            memory, src_mask = model.encode(src.expand(b, -1))                  # [B, S, d]
            hidden = model.decode(tgt_in.expand(b, -1), memory, src_mask)       # [B, T, d]
            log_probs = model.generator(hidden[:, -1:])[:, 0]                   # [B, V]
        return log_probs[:, chosen] - weight * log_probs[:, foil]               # [B]

    return forward, src_vectors, tgt_vectors


def contrast_step(model, src_ids: Sequence[int], prefix: Sequence[int], chosen: int, foil: int,
                  method: str = "integrated-gradients", steps: int = IG_STEPS,
                  budget: int = ATTRIBUTION_BYTES, plain: bool = True) -> StepContrast:
    """The contrastive and the plain attribution of one step (module docstring). `foil` is an id
    (explorer.studies.contrastive.foils turns a typed word or a beam candidate into one and checks it). `plain`
    False leaves out the plain attribution of the chosen token, which halves the cost."""
    from captum.attr import InputXGradient, IntegratedGradients

    if method not in ATTRIBUTIONS:
        raise ValueError(f"attribution method must be one of {', '.join(ATTRIBUTIONS)}, not {method!r}")
    if method == "integrated-gradients" and not 1 <= int(steps) <= MAX_IG_STEPS:
        raise ValueError(f"integrated gradients' steps must be in [1, {MAX_IG_STEPS}], not {steps}")
    prefix = check_step(model, prefix, chosen)
    vocab = model.cfg.tgt_vocab_size
    if not 0 <= int(foil) < vocab or int(foil) == int(chosen):
        raise ValueError(f"the foil must be an id in [0, {vocab - 1}] other than the chosen token, not {foil}")
    # rows per batch by bytes, at least the two rows of one path point (captum keeps the inputs' rows together)
    per_batch = max(2, rows_per_batch(model.cfg, len(src_ids), len(prefix) + 1, budget))
    with QUEUE.slot():
        match_threads()
        forward, src_vectors, tgt_vectors = _function(model, src_ids, prefix, int(chosen), int(foil))
        with eval_mode(model):
            rows = 2 if plain else 1
            inputs = (src_vectors.expand(rows, -1, -1).contiguous(), tgt_vectors.expand(rows, -1, -1).contiguous())
            weight = torch.tensor([1.0, 0.0][:rows], device=src_vectors.device)  # [rows]: the contrast, the plain
            with torch.no_grad():
                value = forward(*inputs, weight)                                 # [rows]
                chosen_lp = float(value[1]) if plain else float(forward(*inputs, weight * 0)[0])   # log p(chosen)
                base = forward(*(torch.zeros_like(x) for x in inputs), weight) if method != "grad-x-input" else value
            if method == "grad-x-input":
                attr = InputXGradient(forward).attribute(tuple(x.clone().requires_grad_() for x in inputs),
                                                         additional_forward_args=(weight,))
                delta = None
            else:
                attr, delta = IntegratedGradients(forward).attribute(
                    inputs, baselines=tuple(torch.zeros_like(x) for x in inputs), additional_forward_args=(weight,),
                    n_steps=int(steps), internal_batch_size=per_batch, return_convergence_delta=True)
            source = attr[0].sum(dim=-1).detach().double().cpu().numpy()        # [rows, S]
            target = attr[1].sum(dim=-1).detach().double().cpu().numpy()        # [rows, T]
    value, base = value.double().cpu().numpy(), base.double().cpu().numpy()     # [rows], [rows]
    deltas = [None] * rows if delta is None else [float(d) for d in delta]
    parts = [Attribution(source=source[i], target=target[i], value=float(value[i]), baseline=float(base[i]),
                         delta=deltas[i]) for i in range(rows)]
    return StepContrast(method=method, chosen=int(chosen), foil=int(foil), chosen_logprob=chosen_lp,
                        foil_logprob=chosen_lp - float(value[0]), contrast=parts[0], plain=parts[1] if plain else None,
                        steps=0 if method == "grad-x-input" else int(steps))


def contrast_all(model, src_ids: Sequence[int], prefix: Sequence[int], chosen: int, foil: int,
                 steps: int = IG_STEPS, budget: int = ATTRIBUTION_BYTES) -> dict[str, StepContrast]:
    """Both methods, gradient x input first (what the Beam search page shows side by side)."""
    return {method: contrast_step(model, src_ids, prefix, chosen, foil, method, steps, budget)
            for method in ATTRIBUTIONS}
