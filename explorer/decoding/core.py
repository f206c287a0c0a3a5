"""What every decoding strategy shares: result types, checks, length rules and the step decoder.

Greedy, sampling and beam search differ only in how they choose the next token; how the decoder
is fed (one new token per step against a cache, or the whole prefix again), which tokens are never
allowed, how long an output may get and how a score is length-normalised live here, once.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.inspection.hooks import ablate_heads
from explorer.inspection.trace import attention_kind
from explorer.model.plain_decoder import plain_decoder_of
from explorer.runtime.compute_queue import QUEUE
from explorer.runtime.device import match_threads
from explorer.runtime.modes import eval_mode
from explorer.text.special import DEFAULT_IDS, EOS_ID, SpecialIds

NEG_INF = float("-inf")


def special_ids(model: nn.Module) -> SpecialIds:
    """The model's special ids (its config's pad/unk/eos/decoder start), the constants for a model
    without a ModelConfig."""
    cfg = getattr(model, "cfg", None)
    return cfg.special if hasattr(cfg, "special") else DEFAULT_IDS


@dataclass(frozen=True)
class Hypothesis:
    """One output sequence. `ids` end with EOS when `finished`; otherwise it hit the max length.

    `token_logprobs[i]` is the model's log-probability of `ids[i]` (untempered, unfiltered), so
    `score == sum(token_logprobs)` and `normalized == score / length_penalty(len(ids))`.
    """

    ids: list[int]
    token_logprobs: list[float]
    score: float
    normalized: float
    finished: bool
    eos_id: int = EOS_ID                           # the model's EOS (its cfg.eos_id)

    @property
    def output_ids(self) -> list[int]:
        """The ids a tokenizer should turn into text: without the final EOS."""
        return self.ids[:-1] if self.finished and self.ids and self.ids[-1] == self.eos_id else list(self.ids)


@dataclass(frozen=True)
class Decoded:
    """The result for one source sentence: n-best hypotheses (best first) and, on request, a trace.

    `trace` is a decoding.beam_trace.BeamTrace (beam search with trace=True), typed loosely here:
    beam_trace builds on this module (length_penalty), so this module does not import it back.
    """

    hypotheses: list[Hypothesis]
    max_len: int                                   # the output-length limit this sentence had
    trace: Any = None                              # BeamTrace | None
    meta: dict = field(default_factory=dict)

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]


# ---------------------------------------------------------------------------------------- checks

def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def as_batch(src: torch.Tensor | Sequence[Sequence[int]], model: nn.Module,
             device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids (a padded LongTensor [B, S] or ragged lists, EOS included) -> (src [B, S], lengths [B]).

    Padding is the model's pad id."""
    device = device or model_device(model)
    pad = special_ids(model).pad
    if isinstance(src, torch.Tensor):
        batch = src.to(device=device, dtype=torch.long)
        if batch.dim() == 1:
            batch = batch.unsqueeze(0)                                         # [1, S]
    else:
        rows = [list(map(int, row)) for row in src]
        if not rows:
            raise ValueError("no source sentences given")
        width = max(len(r) for r in rows)
        batch = torch.full((len(rows), max(width, 1)), pad, dtype=torch.long)  # [B, S]
        for i, row in enumerate(rows):
            batch[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        batch = batch.to(device)
    lengths = (batch != pad).sum(dim=1)                                     # [B]
    if batch.shape[0] == 0 or bool((lengths == 0).any()):
        raise ValueError("every source needs at least one token (EOS included)")
    max_len = model.cfg.max_len
    if batch.shape[1] > max_len:
        raise ValueError(f"source of {batch.shape[1]} tokens exceeds the model's max_len={max_len} "
                         "(truncate it first; translate() does)")
    vocab = model.cfg.src_vocab_size
    if bool(((batch < 0) | (batch >= vocab)).any()):
        raise ValueError(f"source ids must be in [0, {vocab - 1}]")
    return batch, lengths


def check_prefix(prefix: Sequence[int] | None, model: nn.Module) -> list[int]:
    """A forced target prefix: content ids only (no PAD/start/EOS), shorter than the model's max_len."""
    prefix = [int(t) for t in (prefix or [])]
    vocab = model.cfg.tgt_vocab_size
    ids = special_ids(model)
    bad = [t for t in prefix if not 0 <= t < vocab or t in ids.before_min_len]
    if bad:
        raise ValueError(f"prefix ids must be in [0, {vocab - 1}] and not PAD/BOS/EOS ({ids.pad}/{ids.start}/"
                         f"{ids.eos}); got {bad[:5]}")
    if len(prefix) >= model.cfg.max_len:
        raise ValueError(f"prefix of {len(prefix)} tokens leaves no room: outputs are at most "
                         f"{model.cfg.max_len} tokens (max_len), so the prefix must be in [0, {model.cfg.max_len - 1}]")
    return prefix


def check_config(cfg: DecodeConfig, model: nn.Module, beam: bool = False) -> None:
    """Limits that depend on the model (DecodeConfig itself checks the rest when it is made)."""
    vocab = model.cfg.tgt_vocab_size
    allowed = vocab - len(special_ids(model).before_min_len)   # a beam ranks 2k candidates among the tokens it may write
    if beam and 2 * cfg.beam_size > allowed:
        raise ValueError(f"beam_size must be in [1, {allowed // 2}] for a vocabulary of {vocab}")
    if cfg.top_k > vocab:
        raise ValueError(f"top_k must be in [0, {vocab}] (0 = off)")


def check_ablation(model: nn.Module, heads: Iterable[Sequence]) -> list[tuple[str, int, int]]:
    """(kind, layer, head) triples, 0-based, kind in encoder/decoder/cross; ValueError with the ranges."""
    heads = list(heads or ())
    if heads and getattr(model, "int8", False):
        raise ValueError("heads can be switched off on the float model only (an int8 copy has no modules to hook)")
    out = []
    n_heads = model.cfg.n_heads
    for item in heads or ():
        if len(item) != 3:
            raise ValueError(f"each ablated head is (kind, layer, head), not {item!r}")
        kind, layer, head = item[0], int(item[1]), int(item[2])
        n_layers = attention_kind(kind).n_layers(model.cfg)
        if not 0 <= layer < n_layers:
            raise ValueError(f"{kind} layer must be in [0, {n_layers - 1}], not {layer}")
        if not 0 <= head < n_heads:
            raise ValueError(f"head must be in [0, {n_heads - 1}], not {head}")
        out.append((kind, layer, head))
    return out


@contextmanager
def decoding_session(model: nn.Module, ablate: Iterable[Sequence] = ()) -> Iterator[None]:
    """A place in the compute queue (at most one computation per core runs at once: runtime.compute_queue
    says why), eval mode (restored after), no autograd, and the chosen heads zeroed for the whole decode.

    Ablation wraps the encoder pass too, so encoder-self heads can be knocked out as well.
    """
    heads = check_ablation(model, ablate)
    with QUEUE.slot():
        match_threads()                                 # this thread computes with the process's thread count
        with eval_mode(model):
            with torch.inference_mode(), (ablate_heads(model, heads) if heads else nullcontext()):
                yield


# ------------------------------------------------------------------------------ lengths, scores

def max_lengths(src_lengths: torch.Tensor, cfg: DecodeConfig, model_max_len: int,
                prefix_len: int = 0) -> torch.Tensor:
    """Output-length limit per sentence: a * src_len + b, at least prefix + 1, at most max_len."""
    limit = torch.floor(src_lengths.double() * cfg.max_len_a).long() + cfg.max_len_b   # [B]
    return limit.clamp(min=prefix_len + 1, max=model_max_len)                         # [B]


def length_penalty(length: torch.Tensor | int, kind: str, alpha: float) -> torch.Tensor | float:
    """Divisor of a cumulative log-prob: 1 (none), len (average) or ((5 + len) / 6) ** alpha (GNMT)."""
    if kind == "none":
        return length * 0 + 1.0 if isinstance(length, torch.Tensor) else 1.0
    if kind == "average":
        return length * 1.0
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    raise ValueError(f"length_penalty must be one of none, average, gnmt, not {kind!r}")


def normalize(score: float, length: int, cfg: DecodeConfig) -> float:
    return float(score / length_penalty(max(length, 1), cfg.length_penalty, cfg.alpha))


def constrain(log_probs: torch.Tensor, length: int, min_len: int, special: SpecialIds = DEFAULT_IDS) -> torch.Tensor:
    """Forbid PAD and the start id always and EOS before `min_len` output tokens (`special`: the
    model's ids). log_probs [N, V], in place."""
    banned = list(special.before_min_len if length < min_len else special.never_output)
    return log_probs.index_fill_(1, torch.tensor(banned, device=log_probs.device), NEG_INF)   # [N, V]


# ---------------------------------------------------------------------------------- the decoder

class StepDecoder:
    """Feeds target tokens to the decoder and returns log-probs of what comes next.

    Cached (the default): only the new tokens go in; decoder self-attention keys/values and the
    projected encoder memory are kept in a DecoderCache. Uncached: the whole prefix is run again
    every step; it exists to check the cache and to measure what the cache saves.
    """

    def __init__(self, model: nn.Module, memory: torch.Tensor, src_mask: torch.Tensor, use_cache: bool = True):
        # No padding in the batch (e.g. one sentence): no mask, which lets cross-attention take the
        # unmasked fused kernel (about half the time of the masked one on CPU).
        self.src_mask = None if bool(src_mask.all()) else src_mask             # [N, 1, 1, S] or None
        self.model, self.memory = model, memory                                # [N, S, d]
        self.cache = model.new_cache() if use_cache else None
        self.history: torch.Tensor | None = None                              # [N, t] (uncached only)
        # Same arithmetic without module calls when nothing watches the decoder (no hook, eval mode),
        # cached and uncached alike, so comparing the two measures the cache alone.
        self.plain = None if model.decoding_watched() else plain_decoder_of(model)

    def feed(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [N, n] (the next n inputs) -> log-probs [N, n, V] after each of them."""
        n = tokens.shape[1]
        runner = self.plain or self.model
        if self.cache is not None:
            hidden = runner.decode(tokens, self.memory, self.src_mask, self.cache)       # [N, n, d]
        else:
            self.history = tokens if self.history is None else torch.cat([self.history, tokens], dim=1)
            hidden = runner.decode(self.history, self.memory, self.src_mask)[:, -n:]     # [N, n, d]
        return runner.generator(hidden)                                       # [N, n, V]

    def reorder(self, index: torch.Tensor, *, cross_too: bool = False) -> None:
        """Keep rows `index` [N] (beam search re-parents hypotheses).

        Beams never move between sentences and every beam of a sentence has the same projected
        memory, so by default only the self-attention keys/values (kept under "self" by
        DecoderLayer) are reordered: half the copying of DecoderCache.reorder, every step.
        """
        if self.cache is None:
            if self.history is not None:
                self.history = self.history.index_select(0, index)             # [N, t]
        elif cross_too:
            self.cache.reorder(index)
        else:
            for layer in self.cache.layers:
                part = layer.get("self", {})
                for key in ("k", "v"):
                    if key in part:
                        part[key] = part[key].index_select(0, index)           # [N, H, t, dh]

    def expand(self, k: int) -> None:
        """Repeat every row k times (one source -> k beam rows), cache included: [B, ...] -> [B*k, ...]."""
        index = torch.arange(self.memory.shape[0], device=self.memory.device).repeat_interleave(k)  # [B*k]
        self.memory = self.memory.index_select(0, index)                       # [B*k, S, d]
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, index)               # [B*k, 1, 1, S]
        self.reorder(index, cross_too=True)


def start(model: nn.Module, src: torch.Tensor, prefix: list[int], rows_per_source: int = 1,
          use_cache: bool = True) -> tuple[StepDecoder, torch.Tensor]:
    """Encode once, feed the start id + prefix, then repeat each row: (decoder, log-probs [B * rows, P + 1, V]).

    Position i of the log-probs scores output token i: the prefix's own scores for i < P and the
    distribution of the first free token at i = P. The prefix is fed once per source and the cache
    copied to the beam rows afterwards, so a beam of k costs no more here than greedy.
    """
    memory, src_mask = model.encode(src)                                     # [B, S, d], [B, 1, 1, S]
    step = StepDecoder(model, memory, src_mask, use_cache)
    first = torch.tensor([special_ids(model).start] + prefix, dtype=torch.long, device=src.device)
    log_probs = step.feed(first.unsqueeze(0).expand(src.shape[0], -1))       # [B, P+1, V]
    if rows_per_source > 1:
        step.expand(rows_per_source)
        log_probs = log_probs.repeat_interleave(rows_per_source, dim=0)      # [B*K, P+1, V]
    return step, log_probs


def prefix_logprobs(first: torch.Tensor, prefix: list[int], n_given: int = 0) -> torch.Tensor:
    """Log-probs of the forced prefix tokens from `start()`'s output: [N, P+1, V] -> [N, P].

    The first `n_given` tokens are given, not chosen (a target-language tag: see with_given), so
    they score log-prob 0, as Hugging Face's forced_bos_token_id scores them."""
    if not prefix:
        return first.new_zeros(first.shape[0], 0)
    ids = torch.tensor(prefix, device=first.device).view(1, -1, 1).expand(first.shape[0], -1, -1)
    lp = first[:, :-1].gather(2, ids).squeeze(2)                            # [N, P]
    if n_given:
        lp[:, :n_given] = 0.0
    return lp


def with_given(given: Sequence[int] | None, prefix: Sequence[int] | None) -> tuple[list[int], int]:
    """(the forced tokens: the given ones then the prefix, how many are given).

    Given tokens are an instruction rather than part of the translation: a multilingual model's
    target-language tag (M2M100, NLLB), written first as every output's first token. They are forced
    like a prefix (a "forced" step in the BeamTrace) but score 0, so a score and its length penalty
    count them as Hugging Face's generate(forced_bos_token_id=...) does."""
    given = [int(t) for t in (given or [])]
    return given + [int(t) for t in (prefix or [])], len(given)
