"""Entry points the app and the evaluator call: text in, plain data out.

`decode()` picks the strategy from DecodeConfig; `translate()` adds the tokenizer on both ends and
the soft failures the UI wants (empty text -> an empty result with a reason; an over-long source ->
truncated to the model's max_len with a flag); `attention_trace()` is the one teacher-forced
forward that fills an explorer.inspection.trace.Trace for display. Results hold lists, floats and numpy only,
so st.cache_data can pickle them. The tokenizer only needs encode(text, side), decode(ids, side)
and id_to_piece(id, side).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.beam import beam_search
from explorer.decoding.beam_trace import BeamTrace
from explorer.decoding.core import Decoded, Hypothesis, check_ablation, special_ids
from explorer.decoding.greedy import greedy_search, sample
from explorer.decoding.teacher import capture_forward, score_targets
from explorer.inspection.trace import Trace
from explorer.text.encoding import decoder_inputs, output_ids, with_eos
from explorer.text.special import DEFAULT_IDS, SpecialIds


def decode(model: nn.Module, src, cfg: DecodeConfig | None = None, *, prefix: Sequence[int] | None = None,
           ablate=(), trace: bool = False, use_cache: bool = True, given: Sequence[int] | None = None) -> list[Decoded]:
    """Decode source ids (LongTensor [B, S] or ragged lists, EOS included) with cfg.strategy.

    `trace` applies to beam search only (greedy is beam search of size 1 if you want its trace). On an
    int8 copy of a model (explorer/model/int8.py) each result's meta says so: {"int8": its kernel}.
    `given`: tokens every output starts with, scoring 0 (a multilingual model's target-language tag,
    the tokenizer's `forced_target`; decoding.core.with_given).
    """
    cfg = cfg or DecodeConfig()
    if cfg.strategy == "beam":
        results = beam_search(model, src, cfg, prefix=prefix, ablate=ablate, trace=trace, use_cache=use_cache,
                              given=given)
    else:
        search = greedy_search if cfg.strategy == "greedy" else sample
        results = search(model, src, cfg, prefix=prefix, ablate=ablate, use_cache=use_cache, given=given)
    if getattr(model, "int8", False):
        for result in results:
            result.meta["int8"] = model.kernel
    return results


def decode_batch(model: nn.Module, src_ids: Sequence[Sequence[int]], cfg: DecodeConfig | None = None, *,
                 device: torch.device | str | None = None, given: Sequence[int] | None = None) -> list[list[int]]:
    """Best output ids per source, without EOS (for BLEU). The model must already be on `device`."""
    if not src_ids:
        return []
    return [d.best.output_ids for d in decode(model, src_ids, cfg, given=given)]


@dataclass(frozen=True)
class TranslatedHypothesis:
    ids: list[int]                  # output ids, EOS included when finished
    pieces: list[str]               # one per id
    text: str                       # detokenized, EOS dropped
    score: float                    # sum of token_logprobs
    normalized: float               # score / length penalty
    token_logprobs: list[float]
    finished: bool                  # False: cut at the length limit


@dataclass(frozen=True)
class Translation:
    source: str
    src_ids: list[int]              # encoder input, EOS included (after truncation)
    src_pieces: list[str]
    hypotheses: list[TranslatedHypothesis]   # n-best, best first; empty when nothing was decoded
    beam_trace: BeamTrace | None = None
    truncated: bool = False         # the source was cut to the model's max_len
    reason: str = ""                # why the result is empty or altered ("" when all is normal)
    config: dict = field(default_factory=dict)
    prefix: list[int] = field(default_factory=list)
    ablated: list[tuple[str, int, int]] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def best(self) -> TranslatedHypothesis | None:
        return self.hypotheses[0] if self.hypotheses else None

    @property
    def text(self) -> str:
        return self.best.text if self.best else ""


def encode_source(tokenizer, text: str, max_len: int, special: SpecialIds = DEFAULT_IDS) -> tuple[list[int], bool, str]:
    """explorer.text.encoding's source ids, with the soft failures the UI wants: (ids, truncated, reason);
    ids == [] when there is nothing to translate. `special`: the model's ids (model.cfg.special)."""
    if not text or not text.strip():
        return [], False, "empty input: nothing to translate"
    found = tokenizer.encode(text, side="src")
    if not found:
        return [], False, "the text produced no tokens"
    ids = with_eos(found, max_len, special)
    if len(ids) < len(found) + 1:
        return ids, True, f"source truncated from {len(found) + 1} to {max_len} tokens (the model's max_len)"
    return ids, False, ""


def translate(model: nn.Module, tokenizer, text: str, cfg: DecodeConfig | None = None, *,
              prefix: list[int] | None = None, ablate: Iterable[Sequence] = (), trace: bool = False) -> Translation:
    """Translate one text. Bad config, prefix or head indices raise ValueError; bad text does not."""
    cfg = cfg or DecodeConfig()
    heads = check_ablation(model, ablate)
    src_ids, truncated, reason = encode_source(tokenizer, text, model.cfg.max_len, special_ids(model))
    common = dict(source=text, truncated=truncated, reason=reason, config=cfg.to_dict(),
                  prefix=list(prefix or []), ablated=heads)
    if not src_ids:
        return Translation(src_ids=[], src_pieces=[], hypotheses=[], **common)
    result = decode(model, [src_ids], cfg, prefix=prefix, ablate=heads, trace=trace, given=forced_target(tokenizer))[0]
    return Translation(src_ids=src_ids, src_pieces=pieces(tokenizer, src_ids, "src"),
                       hypotheses=[_with_text(tokenizer, h) for h in result.hypotheses],
                       beam_trace=result.trace, meta={"max_len": result.max_len, **result.meta}, **common)


def score_text(model: nn.Module, tokenizer, text: str, target: str, cfg: DecodeConfig | None = None, *,
               ablate: Iterable[Sequence] = ()) -> TranslatedHypothesis | None:
    """Teacher-forced score of a given translation (e.g. a reference); None for empty text. A multilingual
    model's target tag, which the reference starts with, scores 0 as in translate()."""
    src_ids, _, _ = encode_source(tokenizer, text, model.cfg.max_len, special_ids(model))
    if not src_ids:
        return None
    tgt_ids = output_ids(tokenizer, target, model.cfg.max_len, special_ids(model))
    return _with_text(tokenizer, score_targets(model, [src_ids], [tgt_ids], cfg, ablate=ablate,
                                               given=forced_target(tokenizer))[0])


def attention_trace(model: nn.Module, tokenizer, src_ids: Sequence[int], tgt_ids: Sequence[int],
                    patterns: str | Iterable[str] = "*", *, ablate: Iterable[Sequence] = ()) -> Trace:
    """One teacher-forced forward over (source, chosen output) inside capture().

    tgt_ids are the output ids (e.g. a hypothesis's `ids`, EOS included); the Trace's tgt_tokens
    are the decoder inputs BOS + tgt_ids[:-1], as explorer.inspection.trace documents. meta carries the ids,
    the model's eos id, the output pieces and the per-token log-probs.
    """
    raw, token_lp = capture_forward(model, src_ids, tgt_ids, patterns, ablate)
    tgt_in = decoder_inputs(tgt_ids, special_ids(model))
    meta = {**raw.meta, "src_ids": [int(i) for i in src_ids], "tgt_ids": [int(i) for i in tgt_ids],
            "tgt_in_ids": tgt_in, "out_tokens": pieces(tokenizer, tgt_ids, "tgt"),
            "token_logprobs": token_lp, "ablated": check_ablation(model, ablate), "eos_id": special_ids(model).eos}
    return Trace(arrays=raw.arrays, src_tokens=pieces(tokenizer, src_ids, "src"),
                 tgt_tokens=pieces(tokenizer, tgt_in, "tgt"), meta=meta)


def forced_target(tokenizer) -> list[int]:
    """The tokens a tokenizer says every output starts with (a multilingual tokenizer's target-language
    tag, explorer.text.multilingual); none for the others."""
    return list(getattr(tokenizer, "forced_target", None) or [])


def word_ids(tokenizer, text: str, side: str = "tgt") -> list[int]:
    """The piece ids of `text` as words inside a sentence (a foil, a swapped word): without what a
    multilingual tokenizer writes in front of a whole sentence (its language tag, what it encodes ""
    as); a one-pair tokenizer's ids as they are."""
    ids, lead = [int(t) for t in tokenizer.encode(text, side=side)], [int(t) for t in tokenizer.encode("", side=side)]
    return ids[len(lead):] if lead and ids[:len(lead)] == lead else ids


def pieces(tokenizer, ids: Sequence[int], side: str) -> list[str]:
    if tokenizer is None:
        return [str(int(i)) for i in ids]
    return [tokenizer.id_to_piece(int(i), side) for i in ids]


def _with_text(tokenizer, hyp: Hypothesis) -> TranslatedHypothesis:
    text = tokenizer.decode(hyp.output_ids, side="tgt") if tokenizer is not None else " ".join(map(str, hyp.output_ids))
    return TranslatedHypothesis(ids=hyp.ids, pieces=pieces(tokenizer, hyp.ids, "tgt"), text=text, score=hyp.score,
                                normalized=hyp.normalized, token_logprobs=hyp.token_logprobs, finished=hyp.finished)
