"""A TopK (skip) transcoder: an FFN's input mapped to its output through a wide, sparse layer of latents,
each a "feature" with one encoder direction (when it fires) and one decoder direction (what it writes),
beside, in the skip form, a dense linear map for the part of the FFN that is linear in its input.

    z = TopK_k(x W_enc + b_enc)      the k largest pre-activations kept, negatives set to 0   [m]
    y = z W_dec + x W_skip^T + b_dec                                                         [d_out]

TopK (Gao et al. 2024, "Scaling and evaluating sparse autoencoders") fixes the number of active latents
at k, so no sparsity penalty needs tuning; the transcoder form (Dunefsky et al. 2024, "Transcoders find
interpretable LLM feature circuits") predicts the FFN's output from its input; the skip connection
(Paulo, Shabalin & Belrose 2025, "Transcoders beat sparse autoencoders for interpretability"; SAELens's
SkipTranscoder, W_skip [d_out, d_in]) takes the linear part. Why the skip: without it, on bible-es-en's
encoder layer 2 (120,000 rows, 1,500 steps) four latents fired on more than 90% of tokens, carrying
that linear part (a least-squares map alone explains 0.72 of the variance); with the skip and the
inputs centred while training, the busiest latent fires on 23% (python -m benchmarks features). Not every FFN
needs it, and where one is nearly linear the skip leaves its latents little to do: the job trains the plain
form (TrainSettings.skip False, W_skip 0) first and the skip form only where a plain latent turns dense
(job.FeatureSettings.skip, "auto"; site_training.py).

Training: Adam on the squared error of y against the FFN's own output, in shares of its variance, the
inputs centred on their mean (folded into b_enc and b_dec at the end, so the saved form is SAELens's),
the decoder's rows kept at unit norm after each step (a latent's size lives in z), W_skip started at 0,
b_dec at the outputs' mean.

A sparse autoencoder (a residual-stream site, sites.py) is the same model with no skip: W_skip stays 0
and is not trained (TrainSettings.skip False), and its target is its own input; SAELens's plain "topk"
SAE computes the same z and y (files.py).

AuxK (Gao et al. 2024, section A.2; SAELens's TopK training, whose names the settings keep): with
TrainSettings.aux_loss_coefficient > 0, a latent is dead once it has not fired for more than
dead_feature_window steps; each step the k_aux = d_out // 2 dead latents with the largest pre-activations
(not passed through the ReLU, as SAELens) write, through their own decoder rows and no bias, a guess at what
the live latents left unexplained (the target minus the output, detached), and its squared error, in the
same shares of the target's variance as the main loss, is added times the coefficient times
min(dead / k_aux, 1) (SAELens's scale for few dead latents). A dead latent so still gets a gradient, to its
encoder column and its decoder row, and can come back. Nothing is added while no latent is dead.

The random baseline (beside every quality figure): the same k, width and skip with the decoder's
directions drawn at random and frozen (unit rows), the encoder, the skip (a transcoder's) and both biases
trained: what a dictionary reaches without learning what to write.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


# A training step holds a few [batch, width] float32 tensors (the pre-activations, the fired mask, their
# gradients, AuxK's masked copy): measured 3.2 floats per batch x latent without AuxK and 6.5 with it (width
# 16,384, batch 4,096: 0.8 and 1.6 GiB). Counted as STEP_FLOATS, a step is bounded by STEP_BYTES: width
# 16,384 with batch 65,536 (each in its range) asked for 4 GiB in one tensor and more in all.
STEP_FLOATS = 8
STEP_BYTES = 2 << 30


def step_bytes(batch: int, width: int) -> int:
    """About how many bytes one training step of `batch` rows through `width` latents takes (an upper bound)."""
    return int(batch) * int(width) * 4 * STEP_FLOATS


def check_step(batch: int, width: int) -> None:
    """ValueError when a step of `batch` rows through `width` latents would pass STEP_BYTES."""
    if step_bytes(batch, width) > STEP_BYTES:
        raise ValueError(f"batch {batch:,} x width {width:,} needs about {step_bytes(batch, width) / 2**30:.1f} GiB "
                         f"per training step (at most {STEP_BYTES / 2**30:.0f} GiB): lower --batch or the width")


@dataclass(frozen=True)
class TrainSettings:
    width: int = 1024          # latents m (4 x d_model at the shipped size)
    k: int = 32                # active latents per row
    steps: int = 3000
    batch: int = 1024
    lr: float = 1e-3
    seed: int = 0
    random_decoder: bool = False   # the random baseline: frozen random decoder directions
    skip: bool = True              # a transcoder's linear skip; False: W_skip stays 0 (a plain transcoder, an SAE)
    aux_loss_coefficient: float = 0.0   # AuxK's weight (0: off; the paper's 1/32); SAELens's name
    dead_feature_window: int = 100      # steps without firing after which a latent is dead (AuxK); SAELens's name

    def __post_init__(self) -> None:
        check_step(self.batch, self.width)


def topk_relu(pre: torch.Tensor, k: int) -> torch.Tensor:
    """The k largest entries of each row kept (negatives among them set to 0), the rest 0; SAELens's
    TopK activation does the same (top k, then ReLU)."""
    values, index = pre.topk(k, dim=-1, sorted=False)                              # [N, k]
    return torch.zeros_like(pre).scatter_(-1, index, values.relu())                # [N, m]


class TopKTranscoder(nn.Module):
    def __init__(self, d_in: int, width: int, d_out: int, k: int):
        super().__init__()
        if not 0 < k <= width:
            raise ValueError(f"k must be in 1..{width}, not {k}")
        self.k = k
        self.W_enc = nn.Parameter(torch.zeros(d_in, width))
        self.b_enc = nn.Parameter(torch.zeros(width))
        self.W_dec = nn.Parameter(torch.zeros(width, d_out))
        self.W_skip = nn.Parameter(torch.zeros(d_out, d_in))
        self.b_dec = nn.Parameter(torch.zeros(d_out))

    @property
    def width(self) -> int:
        return self.W_enc.shape[1]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, d_in] -> latents [N, m], k of them non-zero per row (at most)."""
        return topk_relu(x @ self.W_enc + self.b_enc, self.k)                     # [N, m]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """What the latents write, bias included (the skip's share is skip(x))."""
        return z @ self.W_dec + self.b_dec                                         # [N, d_out]

    def skip(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.W_skip.T                                                   # [N, d_out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """decode(encode(x)) + skip(x), computed from the k active latents only (the dense product with
        W_dec would cost m / k times as much)."""
        return self.forward_with_pre(x)[0]

    def forward_with_pre(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(forward(x) [N, d_out], the pre-activations [N, m], which latents fired [N, m] bool): what
        training's AuxK reads besides the output."""
        pre = x @ self.W_enc + self.b_enc                                                    # [N, m]
        values, index = pre.topk(self.k, dim=-1, sorted=False)                              # [N, k]
        picked = self.W_dec.index_select(0, index.flatten()).view(*index.shape, -1)         # [N, k, d_out]
        out = (values.relu().unsqueeze(-1) * picked).sum(-2) + self.skip(x) + self.b_dec    # [N, d_out]
        fired = torch.zeros_like(pre, dtype=torch.bool).scatter_(-1, index, values > 0)     # [N, m]
        return out, pre, fired


def aux_k_loss(tc: TopKTranscoder, pre: torch.Tensor, out: torch.Tensor, target: torch.Tensor,
               dead: torch.Tensor) -> torch.Tensor:
    """AuxK's squared error (not yet weighted or scaled by the variance): the k_aux = d_out // 2 dead
    latents (dead [m] bool) with the largest pre-activations (pre [N, m]) of each row, through their decoder
    rows, against what the output (out [N, d_out]) left of the target, detached; times min(dead / k_aux, 1).
    0 when no latent is dead."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return out.new_zeros(())
    k_aux = max(target.shape[-1] // 2, 1)
    scale = min(n_dead / k_aux, 1.0)
    values, index = pre.masked_fill(~dead, -torch.inf).topk(min(k_aux, n_dead), dim=-1, sorted=False)  # [N, ka]
    picked = tc.W_dec.index_select(0, index.flatten()).view(*index.shape, -1)                        # [N, ka, d]
    guess = (values.unsqueeze(-1) * picked).sum(-2)                                                  # [N, d_out]
    residual = (target - out).detach()                                                               # [N, d_out]
    return scale * ((guess - residual) ** 2).sum(-1).mean()


def _unit_rows(w: torch.Tensor) -> torch.Tensor:
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-8)


def train(inputs: np.ndarray, outputs: np.ndarray, settings: TrainSettings = TrainSettings(),
          on_step=None, give_up=None) -> TopKTranscoder | None:
    """A transcoder of inputs [N, d_in] -> outputs [N, d_out] (float32 rows of one site; an SAE: outputs is
    inputs and settings.skip False); on_step(step, loss) after each step (a progress bar, a cancel: it may
    raise); give_up(step, encode) after each step, encode(x) the latents [N, m] of rows x [N, d_in] as they
    stand (the centring applied): True ends the training there and returns None (a form refused before its
    end). Deterministic for one seed."""
    gen = torch.Generator().manual_seed(settings.seed)
    x_all, y_all = torch.from_numpy(inputs).float(), torch.from_numpy(outputs).float()   # [N, d_in], [N, d_out]
    mean_in = x_all.mean(0)                                                               # [d_in]
    d_in, d_out = x_all.shape[1], y_all.shape[1]
    tc = TopKTranscoder(d_in, settings.width, d_out, settings.k)
    with torch.no_grad():
        tc.W_dec.copy_(_unit_rows(torch.randn(settings.width, d_out, generator=gen)))
        tc.W_enc.copy_(tc.W_dec.T[:d_in] if d_in == d_out else torch.randn(d_in, settings.width, generator=gen)
                       / d_in ** 0.5)                               # the encoder starts as the decoder's transpose
        tc.b_dec.copy_(y_all.mean(0))
    if settings.random_decoder:
        tc.W_dec.requires_grad_(False)
    if not settings.skip:
        tc.W_skip.requires_grad_(False)                             # no skip (a plain transcoder, an SAE): W_skip stays 0
    params = [p for p in tc.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=settings.lr)
    scale = y_all.var(0).sum().clamp_min(1e-12)                     # the loss in shares of the outputs' variance
    since_fired = torch.zeros(settings.width, dtype=torch.long)     # AuxK: steps since each latent last fired
    for step in range(settings.steps):
        rows = torch.randint(len(x_all), (settings.batch,), generator=gen)
        if settings.aux_loss_coefficient > 0:
            target = y_all[rows]                                                          # [B, d_out]
            out, pre, fired = tc.forward_with_pre(x_all[rows] - mean_in)                  # trained on centred rows
            loss = ((out - target) ** 2).sum(1).mean() / scale
            dead = since_fired > settings.dead_feature_window                             # [m]
            loss = loss + settings.aux_loss_coefficient * aux_k_loss(tc, pre, out, target, dead) / scale
            since_fired += 1
            since_fired[fired.any(0)] = 0
        else:
            loss = ((tc(x_all[rows] - mean_in) - y_all[rows]) ** 2).sum(1).mean() / scale   # trained on centred rows
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if not settings.random_decoder:
            with torch.no_grad():
                tc.W_dec.copy_(_unit_rows(tc.W_dec))
        if on_step is not None:
            on_step(step + 1, float(loss.detach()))
        if give_up is not None and give_up(step + 1, lambda x: tc.encode(x - mean_in)):
            return None
    with torch.no_grad():                                           # the centring folded into the biases:
        tc.b_enc.sub_(mean_in @ tc.W_enc)                           # tc(x) now reads x itself
        tc.b_dec.sub_(tc.W_skip @ mean_in)
    return tc.eval()
