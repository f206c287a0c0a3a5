"""Head importance (Michel et al. 2019) and what removing one head costs.

Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than One?" (NeurIPS), put a gate
xi_h on every head's output, Att(x) = sum_h xi_h * Att_h(x) with xi_h = 1, and score a head by
how much the loss would move if its gate moved: I_h = E_x |dL(x)/d xi_h|, normalised by the l2 norm
within each layer. Here the gate multiplies the head's `context` capture point ([B, H, q, d_head],
before W^O) through hooks.intervene, so a gate of 1 leaves the model as it is and a gate of 0 is
exactly hooks.ablate_heads. Gates are per sentence ([B, L, H] per kind), so one backward pass over a
batch gives every sentence's own gradient and the absolute value is taken per sentence, as E_x |.|
asks (a batch-summed gradient would let sentences cancel).

Removing heads to *decode* uses an identity instead of hooks: zeroing head h's context is the same
as zeroing W^O's input columns h*d_head:(h+1)*d_head, so `HeadRemover` decodes a copy of the model
with those columns zeroed, which keeps decoding on its fast unhooked path (a hooked decode is ~5x
slower). The test suite checks the two agree.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch
from torch import nn

from explorer.decoding.core import special_ids
from explorer.decoding.translate import forced_target
from explorer.evaluation.scores import corpus_scores
from explorer.studies.heads.memo import EncoderMemo, removes_encoder_heads, teacher_log_probs
from explorer.studies.common.sentences import SentenceSet, greedy_texts, teacher_batches
from explorer.studies.heads.verify import greedy_outputs, still_greedy
from explorer.inspection.hooks import intervene
from explorer.inspection.trace import ATTENTION_KINDS, KINDS, attention_name
from explorer.runtime.modes import eval_mode
from explorer.runtime.progress import Cancelled
from explorer.runtime.split import ONE, Split

Head = tuple[str, int, int]           # (kind, layer, head), 0-based


def all_heads(model: nn.Module, kinds: Iterable[str] = KINDS) -> list[Head]:
    return [(kind, layer, head) for kind in kinds for layer in range(ATTENTION_KINDS[kind].n_layers(model.cfg))
            for head in range(model.cfg.n_heads)]


@contextmanager
def gated(model: nn.Module, gates: dict[str, torch.Tensor]) -> Iterator[None]:
    """Multiply each head's context by its gate during the block. gates[kind]: [L, H] (the same for
    every sentence) or [B, L, H] (one gate per sentence of the batch)."""
    def edit(gate: torch.Tensor, layer: int):
        def apply(context: torch.Tensor) -> torch.Tensor:                     # [B, H, q, dh]
            g = gate[layer] if gate.dim() == 2 else gate[:, layer]            # [H] or [B, H]
            g = g.view(1, -1, 1, 1) if g.dim() == 1 else g[:, :, None, None]  # [1|B, H, 1, 1]
            return context * g.to(context.device, context.dtype)              # [B, H, q, dh]
        return apply

    edits = {attention_name(kind, layer, "context"): edit(gate, layer)
             for kind, gate in gates.items() for layer in range(gate.shape[-2])}
    with intervene(model, edits):
        yield


def sentence_losses(log_probs: torch.Tensor, tgt_out: torch.Tensor, pad: int) -> torch.Tensor:
    """Mean token cross-entropy of each sentence: log_probs [B, T, V], tgt_out [B, T] -> [B]."""
    nll = -log_probs.gather(2, tgt_out.unsqueeze(2)).squeeze(2)               # [B, T]
    real = (tgt_out != pad).float()                                           # [B, T]
    return (nll * real).sum(1) / real.sum(1).clamp(min=1)                     # [B]


def gradient_importance(model: nn.Module, sents: SentenceSet, batch_size: int = 16,
                        tick: Callable[[int], bool] | None = None, split: Split = ONE) -> dict[str, np.ndarray]:
    """Michel et al.'s I_h = mean over sentences of |dL/dxi_h|, per kind [L, H], not yet normalised.
    L is each sentence's mean teacher-forced token loss on sents.out. With a `split`, each process
    takes its share of the batches; the per-batch sums are added in batch order (the same sum)."""
    pad = special_ids(model).pad
    n_heads = model.cfg.n_heads
    total = {kind: torch.zeros(ATTENTION_KINDS[kind].n_layers(model.cfg), n_heads) for kind in KINDS}
    batches = list(teacher_batches(model, sents, batch_size))
    own: dict[int, list[torch.Tensor]] = {}
    done = 0
    with eval_mode(model):
        for b in split.mine(len(batches)):
            idx, src, tgt_in, tgt_out = batches[b]
            gates = {kind: torch.ones(len(idx), t.shape[0], n_heads, requires_grad=True)  # [B, L, H]
                     for kind, t in total.items()}
            with torch.enable_grad(), gated(model, gates):
                loss = sentence_losses(model(src, tgt_in), tgt_out, pad)      # [B]
                grads = torch.autograd.grad(loss.sum(), list(gates.values()))  # each [B, L, H]
            own[b] = [g.abs().sum(0) for g in grads]                          # each [L, H]
            done += len(idx)
            if tick is not None and tick(min(len(sents), done * split.world)) is False:
                raise Cancelled()
    for sums in split.gather(own, len(batches)):
        for kind, g in zip(total, sums):
            total[kind] += g                                                  # [L, H]
    return {kind: (t / len(sents)).numpy().astype(np.float64) for kind, t in total.items()}


def normalize_per_layer(importance: np.ndarray) -> np.ndarray:
    """Michel et al.'s normalisation: each layer's scores divided by their l2 norm ([L, H] -> [L, H];
    an all-zero layer stays zero)."""
    norms = np.linalg.norm(importance, axis=1, keepdims=True)                 # [L, 1]
    return np.where(norms > 0, importance / np.where(norms > 0, norms, 1.0), 0.0)


@torch.no_grad()
def teacher_loss(model: nn.Module, sents: SentenceSet, removed: Iterable[Head] = (), batch_size: int = 32,
                 memo: EncoderMemo | None = None) -> float:
    """Mean over sentences of the teacher-forced token loss, with `removed` heads gated to 0. With a
    `memo`, a removal that leaves the encoder whole reuses the full model's encoder output
    (explorer.studies.heads.memo: the same numbers)."""
    heads = list(removed)
    gates = {kind: torch.ones(ATTENTION_KINDS[kind].n_layers(model.cfg), model.cfg.n_heads) for kind in KINDS}
    for kind, layer, head in heads:
        gates[kind][layer, head] = 0.0
    pad = special_ids(model).pad
    reuse = None if removes_encoder_heads(heads) else memo
    total = 0.0
    with gated(model, {k: g for k, g in gates.items() if (g == 0).any()}) if heads else _nothing():
        for _, src, tgt_in, tgt_out in teacher_batches(model, sents, batch_size):
            total += float(sentence_losses(teacher_log_probs(model, src, tgt_in, reuse), tgt_out, pad).sum())
    return total / len(sents)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


class HeadRemover:
    """A private copy of the model whose W^O input columns are zeroed for the heads removed, so that
    decoding runs unhooked (see the module docstring). `scores(removed)` decodes the set greedily and
    returns BLEU/chrF; results are kept per set of removed heads, so curves that share a point
    (nothing removed, everything removed) decode it once. With `reuse` (the default), a single head's
    removal first checks the full model's outputs in one teacher-forced pass (explorer.studies.heads.verify)
    and decodes step by step only the sentences whose output it cannot show unchanged, and its `memo`
    keeps the full model's encoder outputs for the passes that remove only decoder heads (these checks
    and teacher_loss); reuse=False decodes every sentence of every removal and encodes in every pass
    (the path before, kept to compare against)."""

    def __init__(self, model: nn.Module, tokenizer, sents: SentenceSet, stop: Callable[[], bool] | None = None,
                 reuse: bool = True):
        self.model = copy.deepcopy(model).eval()
        self.stop = stop                          # asked before each decoding batch (Cancel within one batch)
        self.tokenizer, self.sents, self.reuse = tokenizer, sents, reuse
        self.d_head = model.cfg.d_model // model.cfg.n_heads
        self.originals = {(kind, layer): self._w_o(kind, layer).detach().clone()
                          for kind in KINDS for layer in range(ATTENTION_KINDS[kind].n_layers(model.cfg))}
        self.cache: dict[frozenset, dict[str, float]] = {}
        self.full: list | None = None             # the full model's greedy outputs (verify.Output each)
        self.checked = self.redecoded = 0         # sentences checked in one pass / decoded again after a check
        self.memo = EncoderMemo() if reuse else None   # shared with teacher_loss: the copy's encoder is the model's

    def _w_o(self, kind: str, layer: int) -> torch.Tensor:
        spec = ATTENTION_KINDS[kind]
        return getattr(getattr(self.model, spec.stack).layers[layer], spec.block).w_o.weight   # [d, H*dh]

    @torch.no_grad()
    def apply(self, removed: Iterable[Head]) -> None:
        """Set the copy's W^O weights: originals with the removed heads' input columns zeroed."""
        by_layer: dict[tuple[str, int], list[int]] = {}
        for kind, layer, head in removed:
            by_layer.setdefault((kind, layer), []).append(head)
        for key, original in self.originals.items():
            weight = original.clone()                                         # [d, H*dh]
            for head in by_layer.get(key, ()):
                weight[:, head * self.d_head:(head + 1) * self.d_head] = 0
            target = self._w_o(*key)
            if not torch.equal(target, weight):
                target.copy_(weight)                                          # bumps _version: decoders rebuild

    def texts(self, removed: Iterable[Head]) -> list[str]:
        heads = list(removed)
        self.apply(heads)
        if not self.reuse:
            return greedy_texts(self.model, self.tokenizer, self.sents, stop=self.stop)
        src, given = self.sents.src, forced_target(self.tokenizer)
        if self.full is None or len(heads) != 1:
            outputs = greedy_outputs(self.model, src, stop=self.stop, given=given)
            if not heads:
                self.full = outputs
        else:
            same = still_greedy(self.model, src, self.full,
                                memo=None if removes_encoder_heads(heads) else self.memo, given=len(given))
            again = [i for i, ok in enumerate(same) if not ok]
            outputs = list(self.full)
            for i, found in zip(again, greedy_outputs(self.model, [src[i] for i in again], stop=self.stop,
                                                        given=given)):
                outputs[i] = found
            self.checked += len(src)
            self.redecoded += len(again)
        eos = special_ids(self.model).eos
        return [self.tokenizer.decode(ids[:-1] if finished and ids and ids[-1] == eos else ids, side="tgt")
                for ids, finished in outputs]

    def scores(self, removed: Iterable[Head]) -> dict[str, float]:
        key = frozenset(removed)
        if key not in self.cache:
            if len(key) == 1 and self.reuse and self.full is None:
                self.scores(())                   # the full model's outputs: the candidates a check needs
            found = corpus_scores(self.texts(key), self.sents.refs)
            self.cache[key] = {"bleu": found["bleu"], "chrf": found["chrf"]}
        return self.cache[key]

    @property
    def decodes(self) -> int:
        """Greedy decodes of the set so far: one per distinct set of removed heads (on a split, by
        any process: the gathered scores are cached alike)."""
        return len(self.cache)


# How single-head removals are scored, and what the JSON says of it. "bleu" (the default) decodes the
# set without each head: its BLEU and chrF drops, exact. "loss" is an approximate option: a head is
# scored by the rise of the teacher-forced loss alone (the loss every run also reports), and no removal
# is decoded, so there is no BLEU drop per head (the full model's BLEU and the pruning curves are decoded
# as always). It saves one greedy decode of the set per head; how well it ranks heads against the BLEU
# drop is measured in docs/PERFORMANCE.md.
SINGLE_REMOVALS = {"bleu": "bleu (exact)", "loss": "loss (approximate)"}


@dataclass(frozen=True)
class Removal:
    """One head removed alone: the set's greedy BLEU/chrF and teacher-forced loss, and their changes
    (BLEU and chrF None when the removals were scored by the loss alone)."""

    kind: str
    layer: int                       # 0-based
    head: int                        # 0-based
    bleu: float | None
    chrf: float | None
    loss: float
    bleu_drop: float | None          # full model's BLEU - this BLEU (positive: removing it hurts)
    chrf_drop: float | None
    loss_rise: float                 # this loss - full model's loss


def single_head_removal(model: nn.Module, remover: HeadRemover, sents: SentenceSet,
                        tick: Callable[[int], bool] | None = None, split: Split = ONE,
                        scoring: str = "bleu") -> list[Removal]:
    """Remove each head alone (Michel et al.'s Table 1 experiment, here for every kind). With a
    `split`, each process removes its share of the heads; every process ends with every result
    (and the remover's cache holds every single-head score, as the pruning curves expect).
    scoring="loss" (SINGLE_REMOVALS) decodes none of the removals: the same losses, no BLEU."""
    if scoring not in SINGLE_REMOVALS:
        raise ValueError(f"single-head removal is scored by one of {tuple(SINGLE_REMOVALS)}, not {scoring!r}")
    decoded = scoring == "bleu"
    full, full_loss = remover.scores(()), teacher_loss(model, sents, memo=remover.memo)
    heads = all_heads(model)

    def one(head: Head) -> tuple[dict[str, float] | None, float]:
        return (remover.scores([head]) if decoded else None), teacher_loss(model, sents, [head], memo=remover.memo)

    def progress(done: int) -> None:
        if tick is not None and tick(done) is False:
            raise Cancelled()

    out = []
    for head, (found, loss) in zip(heads, split.map(heads, one, progress)):
        if found is not None:
            remover.cache[frozenset([head])] = found
        scores = found or {"bleu": None, "chrf": None}
        out.append(Removal(*head, bleu=scores["bleu"], chrf=scores["chrf"], loss=loss,
                           bleu_drop=None if found is None else full["bleu"] - found["bleu"],
                           chrf_drop=None if found is None else full["chrf"] - found["chrf"],
                           loss_rise=loss - full_loss))
    return out
