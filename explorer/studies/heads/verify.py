"""Greedy outputs checked in one pass instead of decoded step by step, where a head's removal leaves them as they were.

Greedy decoding takes the (constrained) argmax at every step, given its own prefix. Feed a candidate
output y, the full model's greedy output, teacher-forced to the model with a head removed: position t
then sees exactly the prefix y_<t that step t of a greedy decode would see. If at every position the
argmax is y_t, ahead of the runner-up by more than MARGIN, and after the last token the argmax is
EOS (or the output hit its length limit, which depends on the source alone), the step-by-step decode
returns y too: the teacher-forced and the step paths compute the same formulas and agree within 1e-5
(tests/unit/test_plain_decoder.py), and MARGIN is a hundred times that. One parallel pass over the
set replaces T sequential steps; a sentence that fails (its output changes, or two pieces are closer
than MARGIN) is decoded step by step as before. Removing one head of a trained model changes few
sentences' outputs, so the head lab's 144 single-head removals at base size are mostly checks.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from explorer.decoding.core import NEG_INF, special_ids
from explorer.decoding.translate import decode
from explorer.studies.heads.memo import EncoderMemo, teacher_log_probs
from explorer.studies.common.sentences import GREEDY, SentenceSet, length_batches, teacher_batches
from explorer.runtime.modes import eval_mode
from explorer.runtime.progress import Cancelled

MARGIN = 1e-3                     # nats between the chosen piece and the runner-up (the paths agree within 1e-5)
Output = tuple[list[int], bool]   # (ids, EOS included when finished; finished)


@torch.no_grad()
def greedy_outputs(model: nn.Module, src: Sequence[Sequence[int]], batch_size: int = 32,
                   stop: Callable[[], bool] | None = None, given: Sequence[int] = ()) -> list[Output]:
    """Greedy outputs of each source in input order, batched as sentences.greedy_ids batches them
    (length_batches: the same sentences share a batch), with whether each ended with EOS (ids include
    it then). `given`: the tokens every output starts with (a multilingual model's target tag)."""
    out: list[Output] = [([], False)] * len(src)
    for idx in length_batches(src, batch_size):
        if stop is not None and stop():
            raise Cancelled()
        for i, d in zip(idx, decode(model, [list(src[i]) for i in idx], GREEDY, given=given)):
            out[i] = (list(d.best.ids), d.best.finished)
    return out


@torch.no_grad()
def still_greedy(model: nn.Module, src: Sequence[Sequence[int]], candidates: Sequence[Output],
                 batch_size: int = 32, memo: EncoderMemo | None = None, given: int = 0) -> list[bool]:
    """For each sentence: would greedy decoding of `model` return its candidate (see the module
    docstring)? One teacher-forced pass per batch; False wherever it cannot be shown. `memo`: the
    full model's encoder outputs, when `model`'s encoder is whole (explorer.studies.heads.memo). `given`:
    how many first tokens greedy was given rather than chose (a target tag): not checked, as not chosen."""
    if GREEDY.min_len:                            # EOS banned early would need per-position bans
        return [False] * len(src)
    special = special_ids(model)
    usable = [i for i, (ids, _) in enumerate(candidates) if ids]
    sents = SentenceSet(src=[list(src[i]) for i in usable], out=[candidates[i][0] for i in usable],
                        refs=[""] * len(usable), forced="output")
    ok = [False] * len(src)
    if not usable:
        return ok
    with eval_mode(model):
        for idx, s, tgt_in, tgt_out in teacher_batches(model, sents, batch_size):
            log_probs = teacher_log_probs(model, s, tgt_in, memo)             # [B, T, V]
            banned = torch.tensor(list(special.never_output), device=log_probs.device)
            log_probs = log_probs.index_fill(2, banned, NEG_INF)              # [B, T, V]
            top = log_probs.topk(2, dim=-1)                                   # values, indices [B, T, 2]
            sure = (top.indices[..., 0] == tgt_out) & (top.values[..., 0] - top.values[..., 1] > MARGIN)  # [B, T]
            for row, i in enumerate(idx):
                n = len(sents.out[i])
                ok[usable[i]] = bool(sure[row, given:n].all())
    return ok
