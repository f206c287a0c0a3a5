"""Decoding that can be watched: greedy, beam search with a complete BeamTrace, sampling, forcing.

    from explorer.decoding import translate, attention_trace
    result = translate(model, tokenizer, "dos mil", DecodeConfig(beam_size=4), trace=True)
    result.best.text, result.beam_trace.to_dataframe()
    attn = attention_trace(model, tokenizer, result.src_ids, result.best.ids)

Modules: core (types, checks, lengths, the cached step decoder), greedy (greedy and sampling),
beam (beam search, one helper per step part), beam_trace (BeamTrace), teacher (scoring a given
target, capture over one forward), translate (text-level entry points).
"""
from explorer.decoding.beam import beam_search
from explorer.decoding.beam_trace import STATUSES, BeamTrace
from explorer.decoding.core import Decoded, Hypothesis, length_penalty
from explorer.decoding.greedy import greedy_search, sample
from explorer.decoding.teacher import score_targets
from explorer.decoding.translate import (TranslatedHypothesis, Translation, attention_trace, decode, decode_batch,
                                         score_text, translate)
from explorer.text.special import BOS_ID, EOS_ID, PAD_ID, UNK_ID     # the special ids, for callers of decoding

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "STATUSES", "UNK_ID", "BeamTrace", "Decoded", "Hypothesis",
           "TranslatedHypothesis", "Translation", "attention_trace", "beam_search", "decode", "decode_batch",
           "greedy_search", "length_penalty", "sample", "score_targets", "score_text", "translate"]
