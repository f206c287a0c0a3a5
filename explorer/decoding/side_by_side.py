"""Training vs inference on one sentence: teacher forcing next to step-by-step decoding.

What a lecture on the paper has to make plain: at training time the decoder reads the target
shifted right (start id + target[:-1]) and scores every position in ONE pass, the causal mask
keeping each position from seeing what comes after it; at inference there is no target, so it
writes one token per step and reads back what it wrote. Given the same inputs the two compute the
same numbers; they part ways only when the model's own token differs from the reference, because
from then on inference reads tokens training never fed it.

`side_by_side()` runs both through the existing entry points (translate() for greedy search,
teacher.forced_choices() for the one teacher-forced forward) and returns plain data. When no
reference is given the forced target is the model's own greedy output, so the two rows of
log-probabilities must agree (within float rounding: the cached step decoder and the full
forward order their sums differently). A multilingual model's target tag is given in both rows
(log-prob 0, and what greedy writes there).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from explorer.config import DecodeConfig
from explorer.decoding.core import special_ids
from explorer.decoding.teacher import forced_choices
from explorer.decoding.translate import forced_target, pieces, translate
from explorer.text.encoding import decoder_inputs, output_ids


@dataclass(frozen=True)
class Row:
    """One decoder run laid out by position i: it read inputs[i] and was scored on outputs[i]."""
    inputs: list[int]                # what the decoder read at each position: start + outputs[:-1]
    outputs: list[int]               # the token at each position (EOS included when finished)
    logprobs: list[float]            # log p(outputs[i] | inputs[:i+1], source)
    input_pieces: list[str]
    output_pieces: list[str]


@dataclass(frozen=True)
class Forced(Row):
    """Teacher forcing: the whole target at once; plus the model's own pick at each position."""
    top_ids: list[int] = field(default_factory=list)       # greedy's choice after the forced prefix
    top_logprobs: list[float] = field(default_factory=list)
    top_pieces: list[str] = field(default_factory=list)

    @property
    def agree(self) -> list[bool]:
        return [a == b for a, b in zip(self.outputs, self.top_ids)]


@dataclass(frozen=True)
class SideBySide:
    source: str
    src_ids: list[int]
    src_pieces: list[str]
    forced: Forced | None            # None when there was nothing to decode
    steps: Row | None                # greedy, one token per step, reading its own tokens
    own_output: bool                 # the forced target is the model's own greedy output
    finished: bool = True            # greedy ended with EOS (else it was cut at the length limit)
    truncated: bool = False
    reason: str = ""                 # why the result is empty or altered

    @property
    def max_difference(self) -> float | None:
        """Largest |teacher-forced - step-by-step| log-prob over the positions both have, when the
        inputs are the same (own_output); None otherwise: with a reference they read other tokens."""
        if not self.own_output or self.forced is None or self.steps is None:
            return None
        pairs = list(zip(self.forced.logprobs, self.steps.logprobs))
        return max((abs(a - b) for a, b in pairs), default=0.0)

    @property
    def first_divergence(self) -> int | None:
        """The first position where greedy's own token differs from the forced target (None: never).
        From here on, inference reads inputs that teacher forcing never showed it."""
        if self.forced is None or self.steps is None:
            return None
        a, b = self.forced.outputs, self.steps.outputs
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return i
        return None if len(a) == len(b) else min(len(a), len(b))     # one is a prefix of the other


def side_by_side(model: nn.Module, tokenizer, text: str, reference: str | None = None,
                 cfg: DecodeConfig | None = None) -> SideBySide:
    """Greedy (step by step) and teacher-forced decoding of `text`.

    The forced target is `reference` (a test pair's translation: target pieces + EOS, cut to
    max_len) when it has any text, else greedy's own output exactly as written (an output cut at the
    length limit stays without EOS). cfg: greedy's length limits and min_len (strategy is ignored).
    Empty text gives an empty result with a reason; a bad config raises ValueError.
    """
    cfg = DecodeConfig(**{**(cfg or DecodeConfig()).to_dict(), "strategy": "greedy", "beam_size": 1, "n_best": 1})
    result = translate(model, tokenizer, text, cfg)
    common = dict(source=text, src_ids=result.src_ids, src_pieces=result.src_pieces,
                  truncated=result.truncated, reason=result.reason)
    if not result.hypotheses:
        return SideBySide(forced=None, steps=None, own_output=True, **common)
    special = special_ids(model)
    best = result.best
    steps = _row(tokenizer, best.ids, best.token_logprobs, special)
    own = not (reference and reference.strip())
    if own:
        target, add_eos = best.ids, False
    else:
        target, add_eos = output_ids(tokenizer, reference, model.cfg.max_len, special), True
    hyp, top_ids, top_lps = forced_choices(model, result.src_ids, target, cfg, add_eos=add_eos,
                                           given=forced_target(tokenizer))
    row = _row(tokenizer, hyp.ids, hyp.token_logprobs, special)
    forced = Forced(**row.__dict__, top_ids=top_ids, top_logprobs=top_lps,
                    top_pieces=pieces(tokenizer, top_ids, "tgt"))
    return SideBySide(forced=forced, steps=steps, own_output=own, finished=best.finished, **common)


def _row(tokenizer, ids: list[int], logprobs: list[float], special) -> Row:
    inputs = decoder_inputs(ids, special)
    return Row(inputs=inputs, outputs=list(ids), logprobs=list(logprobs),
               input_pieces=pieces(tokenizer, inputs, "tgt"), output_pieces=pieces(tokenizer, ids, "tgt"))
