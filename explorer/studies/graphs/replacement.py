"""The local replacement model of one output position: the model made linear in its nodes by freezing
what the sentence fixed, with every FFN replaced by its transcoder plus an error term.

Ameisen et al. 2025 ("Circuit Tracing", transformer-circuits.pub) explain one prompt with a replacement
model that, on that prompt, computes exactly what the model computes but is linear in its nodes. Here the
same for an encoder-decoder model at one output position K (the decoder has read the start id and the
K outputs before, and writes output K):

  - every LayerNorm's divisor sqrt(Var + eps) is held at the sentence's value (functional.scaled_layer_norm):
    the norm becomes affine, its centring kept;
  - every attention pattern (encoder self-, decoder masked self- and cross-attention) is held at the
    sentence's weights: attention becomes a fixed mix of value vectors, affine in what it reads;
  - every FFN becomes its transcoder: decode(z) + skip(x) with the latents z held at the sentence's
    activations (a feature is a node, not a function of x), plus the error node FFN(x) - transcoder(x)
    at each position, so the output is the FFN's own.

What is left between the nodes (embeddings, feature activations, errors) and any later quantity (a
feature's pre-activation, a logit) is affine: residual sums, frozen norms, frozen attention's value and
output products, the transcoders' skip maps and biases. With the sentence's own node values the
replacement reproduces the model's logits (to float rounding); with any other values it is the linear
model an attribution graph reads its edges from (attribution.py).

The model runs as itself, its own modules and model/functional.py's formulas, with forward hooks that
put the frozen quantities in (hooks.py): nothing of the architecture is written again here, so post-norm
and pre-norm models (and any option model/functional.py grows) are replaced alike.

Transcoders are passed in as objects, one per FFN site ("encoder.layers.0.ffn", ...): TopK skip
transcoders as explorer's features study trains them, or anything with encode(x) -> z [N, m], decode(z),
skip(x), forward(x) and W_enc [d, m], b_enc [m], W_dec [m, d] (a study may not import another, so this
one names the interface, not the class).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from explorer.model import functional as fn
from explorer.studies.graphs.hooks import hooked

STACKS = ("encoder", "decoder")


@dataclass(frozen=True)
class Step:
    """The output position traced: what the encoder reads, what the decoder has read, what it writes."""
    src: tuple[int, ...]            # source ids, EOS included: S of them
    prefix: tuple[int, ...]         # decoder input: the start id and outputs 0..K-1: T = K + 1 of them
    token: int                      # output K, whose logit is explained
    foil: int | None = None         # explained instead: logit(token) - logit(foil)

    @property
    def position(self) -> int:
        return len(self.prefix) - 1


@dataclass(frozen=True)
class Active:
    """One site's feature nodes: the latents with a non-zero activation at some position."""
    site: str
    positions: torch.Tensor         # [n] long
    features: torch.Tensor          # [n] long
    values: torch.Tensor            # [n] the activations


@dataclass
class Sources:
    """Values of every node of the replacement model, batch first (each batch row its own set)."""
    embeds: dict[str, torch.Tensor]     # stack -> [B, L, d]: token vectors (scaled) + positions
    acts: dict[str, torch.Tensor]       # site -> [B, n_site]: the active features' activations
    errors: dict[str, torch.Tensor]     # site -> [B, L, d]: FFN output - transcoder output

    def leaves(self) -> list[torch.Tensor]:
        return [*self.embeds.values(), *self.acts.values(), *self.errors.values()]


@dataclass
class Reads:
    """What a replacement pass gives: every FFN's input (a feature reads its pre-activation there) and the
    decoder's output states (the logits read them)."""
    ffn_in: dict[str, torch.Tensor]     # site -> [B, L, d]
    hidden: torch.Tensor                # [B, T, d]


def _keep(store: dict, key: str, what):
    """A recording hook: store[key] = what(module, args, output), the output left as it is."""
    def hook(module, args, output):
        store[key] = what(module, args, output)
    return hook


def ffn_sites(model: nn.Module) -> list[str]:
    """Every FFN of the model, encoder layers first (the names the transcoders are keyed by)."""
    return [name for name, module in model.named_modules() if name.endswith(".ffn")]


class Replacement:
    """The replacement model of `step` for `model` (eval mode) and `transcoders` {site: transcoder}."""

    def __init__(self, model: nn.Module, transcoders: dict, step: Step):
        if model.training:
            raise ValueError("the replacement model is built on a model in eval mode (dropout off)")
        self.model, self.step = model, step
        self.sites = ffn_sites(model)
        missing = [site for site in self.sites if site not in transcoders]
        if missing:
            raise ValueError(f"no transcoder for {missing[0]} ({len(missing)} of {len(self.sites)} sites lack one)")
        param = next(model.parameters())
        self.dtype, self.device = param.dtype, param.device
        self.transcoders = {site: copy.deepcopy(transcoders[site]).to(self.device, self.dtype).eval()
                            for site in self.sites}       # a copy in the model's dtype; the caller's is untouched
        src = torch.tensor([list(step.src)], device=self.device)                          # [1, S]
        prefix = torch.tensor([list(step.prefix)], device=self.device)                    # [1, T]
        self.src_ids, self.prefix_ids = src, prefix
        with torch.no_grad():
            self.model_logits = model.logits(src, prefix)[0]                              # [T, V] unhooked
            self._record(src, prefix)

    # ------------------------------------------------------------------ the sentence's own pass

    def _record(self, src: torch.Tensor, prefix: torch.Tensor) -> None:
        """One pass of the model as it is, keeping what the replacement freezes and its nodes' values."""
        self.scales, self.patterns, self.embeds, seen = {}, {}, {}, {}
        hooks = {}
        for name, module in self.model.named_modules():
            if isinstance(module, nn.LayerNorm):
                hooks[name] = _keep(self.scales, name,
                                    lambda m, args, _o: fn.layer_norm_scale(args[0], m.eps))    # [1, L, 1]
            elif name.endswith(("self_attn.weights", "cross_attn.weights")):
                hooks[name] = _keep(self.patterns, name, lambda _m, _a, out: out)                 # [1, H, q, k]
        for site in self.sites:
            hooks[site] = _keep(seen, site, lambda _m, args, out: (args[0][0], out[0]))          # 2 x [L, d]
        for stack in STACKS:
            hooks[f"{stack}.embed.out"] = _keep(self.embeds, stack, lambda _m, _a, out: out[0])  # [L, d]
        with hooked(self.model, hooks):
            self.model.logits(src, prefix)
        self.active, self.errors, self.ffn_in = {}, {}, {}
        for site in self.sites:
            tc, (x, y) = self.transcoders[site], seen[site]                               # x, y [L, d]
            z = tc.encode(x)                                                              # [L, m]
            positions, features = z.nonzero(as_tuple=True)                                # [n], [n]
            self.active[site] = Active(site, positions, features, z[positions, features])
            self.errors[site] = y - tc(x)                                                 # [L, d]
            self.ffn_in[site] = x

    # ------------------------------------------------------------------ node values

    def actual(self, batch: int = 1, grad: bool = False) -> Sources:
        """The sentence's own node values, `batch` copies (leaves that take gradients with grad=True)."""
        def rows(t: torch.Tensor) -> torch.Tensor:
            return t.unsqueeze(0).expand(batch, *t.shape).clone().requires_grad_(grad)   # [B, ...]
        return Sources(embeds={s: rows(self.embeds[s]) for s in STACKS},
                       acts={s: rows(self.active[s].values) for s in self.sites},
                       errors={s: rows(self.errors[s]) for s in self.sites})

    def zero(self, batch: int = 1) -> Sources:
        """Every node at 0: what is left is the replacement's bias (the biases and LayerNorm shifts)."""
        got = self.actual(batch)
        for group in (got.embeds, got.acts, got.errors):
            for key in group:
                group[key] = torch.zeros_like(group[key])
        return got

    # ------------------------------------------------------------------ the replacement pass

    def run(self, sources: Sources) -> Reads:
        """The replacement model on `sources` (B rows): every FFN input, and the decoder's output states."""
        batch = next(iter(sources.embeds.values())).shape[0]
        reads: dict[str, torch.Tensor] = {}
        hooks = {f"{stack}.embed.out": (lambda _m, _a, _o, v=sources.embeds[stack]: v) for stack in STACKS}
        for name, scale in self.scales.items():
            hooks[name] = lambda m, args, _o, scale=scale: fn.scaled_layer_norm(args[0], scale, m)   # [B, L, d]
        for name, pattern in self.patterns.items():
            hooks[name] = lambda _m, _a, _o, pattern=pattern: pattern       # [1, H, q, k], broadcast over B
        for site in self.sites:
            hooks[site] = lambda _m, args, _o, site=site: self._ffn(site, args[0], sources, reads)
        src = self.src_ids.expand(batch, -1)                                              # [B, S]
        with hooked(self.model, hooks):
            memory, src_mask = self.model.encode(src)                                     # [B, S, d]
            hidden = self.model.decode(self.prefix_ids.expand(batch, -1), memory, src_mask)  # [B, T, d]
        return Reads(ffn_in=reads, hidden=hidden)

    def _ffn(self, site: str, x: torch.Tensor, sources: Sources, reads: dict) -> torch.Tensor:
        """An FFN replaced: the transcoder with its latents held at `sources`' activations, its skip map
        on x, and the error node. decode(z) = z W_dec + b_dec is summed over the active latents only, as
        the transcoder's own forward sums it: a dense z would cost m / k times as much, forward and back."""
        reads[site] = x                                                                   # [B, L, d]
        tc, active = self.transcoders[site], self.active[site]
        written = sources.acts[site].unsqueeze(-1) * tc.W_dec[active.features]            # [B, n, d]
        latents = torch.zeros_like(x).index_add(1, active.positions, written)            # [B, L, d] = z W_dec
        return latents + tc.b_dec + tc.skip(x) + sources.errors[site]                     # [B, L, d]

    # ------------------------------------------------------------------ what is explained

    def logit_direction(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(w [d], b []): the explained logit (or logit difference) is hidden[K] . w + b."""
        proj = self.model.generator.proj
        pick = [self.step.token] if self.step.foil is None else [self.step.token, self.step.foil]
        sign = torch.tensor([1.0, -1.0][:len(pick)], dtype=self.dtype, device=self.device)   # [1] or [2]
        w = sign @ proj.weight[pick]                                                      # [d]
        b = sign @ proj.bias[pick] if proj.bias is not None else torch.zeros((), dtype=self.dtype)
        return w.detach(), b.detach()

    def explained(self, logits: torch.Tensor) -> torch.Tensor:
        """The explained quantity from full logits [..., V]: logit(token), or minus logit(foil)."""
        value = logits[..., self.step.token]
        return value if self.step.foil is None else value - logits[..., self.step.foil]

    def logits(self, reads: Reads) -> torch.Tensor:
        """The replacement's logits at every decoder position [B, T, V]."""
        return self.model.generator.proj(reads.hidden)
