"""Teacher-forced passes: score a given target, and capture attention over a chosen output.

Both run the decoder once over the whole target (no search), which is how the app compares a
reference with the model's own output, and how it gets attention for display: one forward inside
`capture()` over the chosen hypothesis, never hooks inside the beam loop.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import Hypothesis, as_batch, constrain, decoding_session, normalize, special_ids
from explorer.inspection.hooks import capture
from explorer.inspection.trace import Trace
from explorer.text.special import SpecialIds


def score_targets(model: nn.Module, src, targets: Sequence[Sequence[int]], cfg: DecodeConfig | None = None, *,
                  add_eos: bool = True, ablate=(), given: Sequence[int] = ()) -> list[Hypothesis]:
    """Per-token log-probs of each given target (teacher-forced), one Hypothesis per source.

    Targets are output ids (no BOS); EOS is appended when missing if `add_eos`, so a reference
    scores comparably with a finished hypothesis. `normalized` uses cfg's length penalty. `given`: the
    tokens decoding gives every output first (a multilingual model's target tag, core.with_given); a
    target that starts with them scores them 0, as a decoded output does, so the two compare.
    """
    outputs, tgt_out, log_probs = _forced(model, src, targets, add_eos, ablate)   # [B, T], [B, T, V]
    return _hypotheses(model, outputs, tgt_out, log_probs, cfg or DecodeConfig(), given)


def forced_choices(model: nn.Module, src_ids: Sequence[int], target: Sequence[int], cfg: DecodeConfig | None = None,
                   *, add_eos: bool = True, ablate=(),
                   given: Sequence[int] = ()) -> tuple[Hypothesis, list[int], list[float]]:
    """score_targets for one pair, plus what the model itself would write at each position.

    Returns (the scored Hypothesis, top ids, their log-probs): top_ids[i] is the model's choice
    given the source and the forced target[:i], i.e. what greedy search would write after that
    prefix (the argmax after core.constrain: never PAD or the start id, nor EOS before cfg.min_len).
    Where top_ids[i] != ids[i], training-time input and inference-time input part ways. `given` (see
    score_targets): where the target starts with them, greedy writes them, scoring 0.
    """
    cfg = cfg or DecodeConfig()
    outputs, tgt_out, log_probs = _forced(model, [list(src_ids)], [target], add_eos, ablate)  # [1, T], [1, T, V]
    hyp = _hypotheses(model, outputs, tgt_out, log_probs, cfg, given)[0]
    special = special_ids(model)
    n_given = _n_given(hyp.ids, given)
    top_ids, top_lps = list(hyp.ids[:n_given]), [0.0] * n_given
    for t in range(n_given, len(hyp.ids)):
        allowed = constrain(log_probs[:, t].clone(), t, cfg.min_len, special)  # [1, V]
        best = int(allowed[0].argmax())
        top_ids.append(best)
        top_lps.append(float(log_probs[0, t, best]))
    return hyp, top_ids, top_lps


def _forced(model: nn.Module, src, targets: Sequence[Sequence[int]], add_eos: bool,
            ablate) -> tuple[list[list[int]], torch.Tensor, torch.Tensor]:
    """The one teacher-forced forward of scoring: (outputs, padded outputs [B, T], log-probs [B, T, V])."""
    special = special_ids(model)
    outputs = [_with_eos(tgt, add_eos, model) for tgt in targets]
    with decoding_session(model, ablate):
        src, _ = as_batch(src, model)                                         # [B, S]
        if src.shape[0] != len(outputs):
            raise ValueError(f"{src.shape[0]} sources but {len(outputs)} targets")
        tgt_out, tgt_in = _teacher_batch(outputs, src.device, special)        # [B, T], [B, T]
        log_probs = model(src, tgt_in)                                        # [B, T, V]
    return outputs, tgt_out, log_probs


def _n_given(ids: Sequence[int], given: Sequence[int]) -> int:
    """How many of the first ids are the given tokens (all of them or none)."""
    given = [int(t) for t in given]
    return len(given) if given and [int(t) for t in ids[:len(given)]] == given else 0


def _hypotheses(model: nn.Module, outputs: list[list[int]], tgt_out: torch.Tensor, log_probs: torch.Tensor,
                cfg: DecodeConfig, given: Sequence[int] = ()) -> list[Hypothesis]:
    """One Hypothesis per forced output: the log-prob the model gave each of its tokens (a given one: 0)."""
    special = special_ids(model)
    token_lp = log_probs.gather(2, tgt_out.unsqueeze(2)).squeeze(2)           # [B, T]
    hyps = []
    for b, ids in enumerate(outputs):
        lps = token_lp[b, :len(ids)].tolist()
        n_given = _n_given(ids, given)
        lps[:n_given] = [0.0] * n_given
        score = float(sum(lps))
        hyps.append(Hypothesis(ids=list(ids), token_logprobs=lps, score=score,
                               normalized=normalize(score, len(ids), cfg),
                               finished=bool(ids) and ids[-1] == special.eos, eos_id=special.eos))
    return hyps


def capture_forward(model: nn.Module, src_ids: Sequence[int], out_ids: Sequence[int],
                    patterns: str | Iterable[str] = "*", ablate=()) -> tuple[Trace, list[float]]:
    """One teacher-forced forward of one pair inside capture(): (raw Trace, log-probs of out_ids).

    The decoder input is the start id (BOS) + out_ids[:-1], so position i shows what the model looked at when
    it produced out_ids[i]. Ablation hooks are installed first, so captured tensors show the edit.
    """
    out_ids = [int(t) for t in out_ids]
    if not out_ids:
        raise ValueError("need at least one target token to trace")
    if len(out_ids) > model.cfg.max_len:
        raise ValueError(f"target of {len(out_ids)} tokens exceeds max_len={model.cfg.max_len}")
    with decoding_session(model, ablate):
        src, _ = as_batch([list(src_ids)], model)                            # [1, S]
        tgt_out, tgt_in = _teacher_batch([out_ids], src.device, special_ids(model))  # [1, T], [1, T]
        with capture(model, patterns) as trace:
            log_probs = model(src, tgt_in)                                    # [1, T, V]
        token_lp = log_probs.gather(2, tgt_out.unsqueeze(2)).squeeze(2)[0].tolist()
    return trace, token_lp


def _with_eos(target: Sequence[int], add_eos: bool, model: nn.Module) -> list[int]:
    ids = [int(t) for t in target]
    special = special_ids(model)
    if add_eos and (not ids or ids[-1] != special.eos):
        ids.append(special.eos)
    vocab = model.cfg.tgt_vocab_size
    if not ids:
        raise ValueError("empty target (pass add_eos=True to score just EOS)")
    if any(not 0 <= t < vocab or t in special.never_output for t in ids):
        raise ValueError(f"target ids must be in [0, {vocab - 1}] and not PAD/BOS ({special.pad}/{special.start})")
    if len(ids) > model.cfg.max_len:
        raise ValueError(f"target of {len(ids)} tokens exceeds max_len={model.cfg.max_len}")
    return ids


def _teacher_batch(outputs: list[list[int]], device: torch.device,
                   special: SpecialIds) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs -> (padded outputs [B, T], decoder inputs start id + outputs[:-1] [B, T])."""
    width = max(len(o) for o in outputs)
    tgt_out = torch.full((len(outputs), width), special.pad, dtype=torch.long)  # [B, T]
    for i, ids in enumerate(outputs):
        tgt_out[i, :len(ids)] = torch.tensor(ids)
    start = torch.full((len(outputs), 1), special.start, dtype=torch.long)   # [B, 1]
    tgt_in = torch.cat([start, tgt_out[:, :-1]], dim=1)                       # [B, T]
    return tgt_out.to(device), tgt_in.to(device)
