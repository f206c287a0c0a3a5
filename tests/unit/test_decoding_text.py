"""Text-level entry points and input validation (stand-in tokenizer, tiny models)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from support.decoding_helpers import StandInTokenizer, random_model, trained  # noqa: F401 (fixtures)
from support.numerics import model_atol
from explorer.config import DecodeConfig
from explorer.decoding import (EOS_ID, attention_trace, beam_search, decode_batch, greedy_search, length_penalty,
                               score_targets, score_text, translate)

torch.set_num_threads(1)
TOK = StandInTokenizer()


def test_translate_returns_plain_picklable_result(trained):
    result = translate(trained, TOK, "a b c d", DecodeConfig(beam_size=3, n_best=2), trace=True)
    assert result.src_ids == [4, 5, 6, 7, EOS_ID] and result.src_pieces == ["a", "b", "c", "d", "</s>"]
    assert len(result.hypotheses) == 2 and result.best is result.hypotheses[0]
    best = result.best
    assert best.text == TOK.decode(best.ids) and result.text == best.text
    assert best.pieces == [TOK.id_to_piece(i) for i in best.ids] and len(best.token_logprobs) == len(best.ids)
    assert result.beam_trace is not None and not result.truncated and result.reason == ""
    assert result.config["beam_size"] == 3
    copy = pickle.loads(pickle.dumps(result))
    assert copy.best == result.best and np.array_equal(copy.beam_trace.candidates, result.beam_trace.candidates)
    assert translate(trained, TOK, "a b c d", DecodeConfig(beam_size=3)).beam_trace is None


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_gives_empty_result_with_reason(trained, text):
    result = translate(trained, TOK, text)
    assert result.hypotheses == [] and result.best is None and result.text == ""
    assert "empty" in result.reason
    assert score_text(trained, TOK, text, "a b") is None


def test_long_text_is_truncated_with_flag():
    model = random_model(0, max_len=12)
    result = translate(model, TOK, " ".join("abcdefghijklmnopqrst"), DecodeConfig(beam_size=2, max_len_b=3))
    assert result.truncated and "truncated from 21 to 12" in result.reason
    assert len(result.src_ids) == 12 and result.src_ids[-1] == EOS_ID
    assert result.best is not None


def test_prefix_and_ablation_through_translate(trained):
    cfg = DecodeConfig(strategy="greedy")
    result = translate(trained, TOK, "a b c", cfg, prefix=[8], ablate=[["cross", 0, 1]])
    assert result.best.ids[0] == 8 and result.prefix == [8] and result.ablated == [("cross", 0, 1)]
    intact = translate(trained, TOK, "a b c", cfg, prefix=[8])
    assert intact.best.ids[0] == 8 and intact.ablated == []
    # the ablation reached the model: the same forced first token, scored without that head, differs
    assert result.best.token_logprobs[0] != pytest.approx(intact.best.token_logprobs[0],
                                                          abs=model_atol(trained, intact.best.token_logprobs))


def test_attention_trace_is_one_forward_with_tokens(trained):
    result = translate(trained, TOK, "a b c", DecodeConfig(beam_size=2))
    src, out = result.src_ids, result.best.ids
    trace = attention_trace(trained, TOK, src, out)
    assert trace.src_tokens == ["a", "b", "c", "</s>"]
    assert trace.tgt_tokens == ["<s>"] + [TOK.id_to_piece(i) for i in out[:-1]]
    assert trace.attention("cross", 1).shape == (1, 4, len(out), len(src))
    assert trace.attention("decoder", 0).shape == (1, 4, len(out), len(out))
    assert trace.attention("encoder", 1).shape == (1, 4, len(src), len(src))
    # one forward over the output against the search's steps: within model_atol (support.numerics)
    assert trace.meta["token_logprobs"] == pytest.approx(result.best.token_logprobs,
                                                         abs=model_atol(trained, result.best.token_logprobs))
    assert trace.meta["tgt_ids"] == out
    weights = trace.attention("cross", 0)
    assert np.allclose(weights.sum(-1), 1.0, atol=1e-5)
    only = attention_trace(trained, TOK, src, out, "decoder.layers.*.cross_attn.weights")
    assert only.names() == ["decoder.layers.0.cross_attn.weights", "decoder.layers.1.cross_attn.weights"]
    ablated = attention_trace(trained, TOK, src, out, "*.context", ablate=[("cross", 0, 2)])
    assert np.all(ablated["decoder.layers.0.cross_attn.context"][:, 2] == 0)
    assert np.any(ablated["decoder.layers.0.cross_attn.context"][:, 1] != 0)


def test_score_text_and_decode_batch(trained):
    scored = score_text(trained, TOK, "a b c", "c b a", DecodeConfig(length_penalty="none"))
    assert scored.ids == [6, 5, 4, EOS_ID] and scored.text == "c b a" and scored.normalized == scored.score
    out = decode_batch(trained, [[4, 5, 3], [6, 3]], DecodeConfig(strategy="greedy"))
    assert all(EOS_ID not in ids for ids in out) and len(out) == 2
    assert decode_batch(trained, [], DecodeConfig()) == []


def test_length_penalty_values():
    assert length_penalty(7, "none", 0.6) == 1.0
    assert length_penalty(7, "average", 0.6) == 7.0
    assert length_penalty(7, "gnmt", 0.6) == pytest.approx(2.0 ** 0.6)
    assert length_penalty(torch.tensor([1, 7]), "gnmt", 1.0).tolist() == pytest.approx([1.0, 2.0])


@pytest.mark.parametrize("field,value,allowed", [
    ("beam_size", 0, "[1, 64]"), ("beam_size", 65, "[1, 64]"), ("n_best", 0, "[1, 64]"),
    ("max_len_a", -1.0, "[0, 10]"), ("max_len_b", -1, "[0, 4096]"), ("min_len", -2, "[0, 4096]"),
    ("length_penalty", "log", "none, average, gnmt"), ("alpha", 9.0, "[0, 5]"), ("temperature", 0.0, "(0, 100]"),
    ("top_p", 1.5, "(0, 1]"), ("top_k", -1, ">= 0"), ("strategy", "viterbi", "greedy, beam, sample"),
    ("trace_top_k", 500, "[0, 100]"),
])
def test_config_validation_names_the_range(field, value, allowed):
    with pytest.raises(ValueError) as err:
        DecodeConfig(**{field: value})
    assert field in str(err.value) and allowed in str(err.value)


def test_model_dependent_validation():
    model = random_model(0, max_len=12)
    with pytest.raises(ValueError, match=r"beam_size must be in \[1, 10\]"):
        beam_search(model, [[4, 3]], DecodeConfig(beam_size=11))
    with pytest.raises(ValueError, match=r"top_k must be in \[0, 24\]"):
        greedy_search(model, [[4, 3]], DecodeConfig(strategy="sample", top_k=30))
    with pytest.raises(ValueError, match="prefix ids"):
        greedy_search(model, [[4, 3]], prefix=[EOS_ID])
    with pytest.raises(ValueError, match=r"prefix must be in \[0, 11\]"):
        greedy_search(model, [[4, 3]], prefix=[5] * 12)
    with pytest.raises(ValueError, match="max_len=12"):
        greedy_search(model, [[4] * 13])
    with pytest.raises(ValueError, match=r"source ids must be in \[0, 23\]"):
        greedy_search(model, [[99, 3]])
    with pytest.raises(ValueError, match="at least one token"):
        greedy_search(model, [[]])
    with pytest.raises(ValueError, match=r"cross layer must be in \[0, 1\]"):
        translate(model, TOK, "a", ablate=[("cross", 2, 0)])
    with pytest.raises(ValueError, match=r"head must be in \[0, 3\]"):
        beam_search(model, [[4, 3]], ablate=[("encoder", 0, 4)])
    with pytest.raises(ValueError, match="kind must be one of"):
        beam_search(model, [[4, 3]], ablate=[("ffn", 0, 0)])
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        score_targets(model, [[4, 3], [5, 3]], [[4]])
