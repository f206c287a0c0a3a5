"""One feature set to a value of the user's choosing, everything else in the model left exactly as it was:
what removing a feature (value 0) or clamping it (another value) does to a translation.

The site keeps computing its own output; only the feature's share of the dictionary's reconstruction is
moved: at the chosen positions the FFN output (an FFN site) or the layer's output (a residual-stream
site, whose SAE reads that same output) becomes

    out + (value - z_f(x)) * W_dec[f]

where x is what the dictionary reads (the FFN's input, or the stream) and z_f(x) the feature's activation
as the dictionary computes it (its TopK included). The dictionary's error (out minus its reconstruction)
stays in the stream, so a clamp to the feature's own
value changes nothing at all, and a feature that does not fire, clamped to 0, changes nothing either (the
tests check both, to the bit). This is the "error kept" intervention of the attribution-graph papers
(Ameisen et al. 2025); a splice of the whole transcoder would mix the dictionary's error into every
effect.

Positions: a mask [B, L] over what the site reads in one pass (the encoder's source pieces, or the
decoder's target positions in a teacher-forced pass); None applies it at every position, which is what a
decoding pass needs (cached decoding feeds the decoder one position at a time).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from explorer.decoding.core import special_ids
from explorer.studies.common.sentences import greedy_ids
from explorer.studies.features.sites import hook as site_hook


@contextmanager
def clamped(model, site: str, tc, feature: int, value: float, mask: torch.Tensor | None = None) -> Iterator[None]:
    """Within the block, `feature` of the dictionary `tc` at `site` reads `value` where `mask` is True."""
    if not 0 <= feature < tc.width:
        raise ValueError(f"feature {feature} is not one of this dictionary's {tc.width}")
    direction = tc.W_dec[feature].detach()                                       # [d]

    def edit(x, output):                                                         # x, output [B, L, d]
        z = tc.encode(x.detach().to(direction.dtype))[..., feature]              # [B, L]
        delta = (value - z).unsqueeze(-1) * direction                            # [B, L, d]
        if mask is not None:
            if tuple(mask.shape) != tuple(z.shape):
                raise ValueError(f"a clamp mask of shape {tuple(mask.shape)} for a pass of {tuple(z.shape)}")
            delta = delta * mask.unsqueeze(-1).to(delta.dtype)
        return output + delta.to(output.dtype)

    handle = site_hook(model, site, edit)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def forced_logprobs(model, src_ids: Sequence[int], out_ids: Sequence[int]) -> torch.Tensor:
    """log p of every vocabulary entry at each forced output position: [T, V], T = len(out_ids)."""
    start = special_ids(model).start
    src = torch.tensor([list(src_ids)])                                           # [1, S]
    tgt_in = torch.tensor([[start] + list(out_ids)[:-1]])                         # [1, T]
    return torch.log_softmax(model.logits(src, tgt_in)[0].float(), dim=-1)        # [T, V]


def positions_mask(length: int, positions: Sequence[int]) -> torch.Tensor:
    """A [1, length] mask, True at `positions` (those outside 0..length-1 are refused)."""
    bad = [p for p in positions if not 0 <= p < length]
    if bad:
        raise ValueError(f"positions {bad[:5]} lie outside 0..{length - 1}")
    mask = torch.zeros(1, length, dtype=torch.bool)
    mask[0, list(positions)] = True
    return mask


@dataclass(frozen=True)
class Steered:
    """A sentence translated again with a feature clamped, and how sure the model stays of its original
    output (teacher-forced, the clamp in place)."""
    site: str
    feature: int
    value: float
    positions: list[int] | None          # the clamped positions (None: every position)
    out_ids: list[int]                   # the greedy translation with the clamp (no EOS)
    plain_ids: list[int]                 # the greedy translation without it: what out_ids is compared with
    before: np.ndarray                   # [T] log p of the original output's tokens, unchanged model
    after: np.ndarray                    # [T] the same with the clamp


@torch.no_grad()
def steer(model, tc, site: str, feature: int, value: float, src_ids: Sequence[int], out_ids: Sequence[int],
          positions: Sequence[int] | None = None, *, given: Sequence[int] = ()) -> Steered:
    """Translate src_ids greedily with the feature clamped and without it (a page decoding by sampling or beam
    search would otherwise credit its own decoding's difference to the feature), and score the original
    output out_ids (EOS included) with and without the clamp. Encoder sites: `positions` are source positions (None: all); decoder
    sites clamp at every target position (cached decoding reads one position at a time).

    `given`: the tokens every output starts with (a multilingual model's target tag:
    translate.forced_target), forced in the steered translation as the original translation had them."""
    encoder = site.startswith("encoder.")
    if not encoder and positions is not None:
        raise ValueError("a decoder feature is clamped at every target position")
    index = torch.tensor(list(out_ids))                                           # [T]
    before = forced_logprobs(model, src_ids, out_ids).gather(1, index[:, None])[:, 0]
    mask = positions_mask(len(src_ids), positions) if encoder and positions is not None else None
    plain = greedy_ids(model, [list(src_ids)], given=given)[0]
    with clamped(model, site, tc, feature, value, mask):
        after = forced_logprobs(model, src_ids, out_ids).gather(1, index[:, None])[:, 0]
        steered = greedy_ids(model, [list(src_ids)], given=given)[0]
    return Steered(site, feature, float(value), None if positions is None else list(positions), steered, plain,
                   before.numpy(), after.numpy())
