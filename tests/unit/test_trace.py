"""Trace as the query API of a capture: the attention-kind table matches the model's capture points,
and Trace.stack / Trace.axes give every consumer the same [layers, heads, queries, keys] view."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.decoding import attention_trace
from explorer.inspection.hooks import capture, capture_points
from explorer.inspection.trace import ATTENTION_KINDS, KIND_LABELS, KINDS, attention_kind, attention_name


@pytest.fixture(scope="module")
def batch_trace(model):
    """A capture over a batch of two different sentences (so rows can be told apart)."""
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 11, 12, 3]])                        # [2, S]
    tgt = torch.tensor([[2, 13, 14, 15], [2, 16, 17, 18]])                            # [2, T]
    with torch.no_grad(), capture(model, ["*.self_attn.*", "*.cross_attn.*"]) as trace:
        model(src, tgt)
    return trace


def test_the_kind_table_names_capture_points_the_model_has(model):
    points = set(capture_points(model))
    for name, kind in ATTENTION_KINDS.items():
        assert kind.name == name and KIND_LABELS[name] == kind.label
        for layer in range(kind.n_layers(model.cfg)):
            for quantity in ("scores", "weights", "context", "out"):
                assert kind.capture_name(layer, quantity) in points
        assert kind.capture_name(kind.n_layers(model.cfg), "weights") not in points   # no layer beyond the count
    assert KINDS == ("encoder", "decoder", "cross")
    assert attention_name("cross", 1, "scores") == "decoder.layers.1.cross_attn.scores"
    with pytest.raises(ValueError, match="encoder, decoder, cross"):
        attention_kind("self")


def test_stack_is_every_layer_of_one_row_in_order(model, batch_trace):
    for kind in KINDS:
        n = ATTENTION_KINDS[kind].n_layers(model.cfg)
        assert batch_trace.n_layers(kind) == n
        for row in (0, 1):
            stack = batch_trace.stack(kind, row=row)                                   # [L, H, q, k]
            assert stack.shape[:2] == (n, model.cfg.n_heads)
            for layer in range(n):
                np.testing.assert_array_equal(stack[layer], batch_trace.attention(kind, layer)[row])
        assert not np.array_equal(batch_trace.stack(kind, row=0), batch_trace.stack(kind, row=1))
        np.testing.assert_allclose(batch_trace.stack(kind).sum(-1), 1.0, atol=1e-5)   # weights: rows sum to 1
        scores = batch_trace.stack(kind, "scores")
        assert scores.shape == batch_trace.stack(kind).shape and not np.allclose(scores, batch_trace.stack(kind))


def test_only_the_causal_kind_hides_later_keys(batch_trace):
    for kind in KINDS:
        weights = batch_trace.stack(kind)                                              # [L, H, q, k]
        later = np.triu(np.ones(weights.shape[2:], dtype=bool), k=1)
        assert (weights[..., later] == 0).all() == ATTENTION_KINDS[kind].causal


def test_axes_name_the_tokens_of_each_kinds_queries_and_keys(model):
    trace = attention_trace(model, None, [5, 6, 7, 8, 9, 3], [13, 14, 3])
    assert trace.axes("encoder") == (trace.src_tokens, trace.src_tokens)
    assert trace.axes("decoder") == (trace.tgt_tokens, trace.tgt_tokens)
    assert trace.axes("cross") == (trace.tgt_tokens, trace.src_tokens)
    for kind in KINDS:
        queries, keys = trace.axes(kind)
        assert trace.stack(kind).shape[2:] == (len(queries), len(keys))


def test_a_kind_that_was_not_captured_says_so(model, batch):
    with torch.no_grad(), capture(model, "encoder.layers.*.self_attn.weights") as trace:
        model(*batch)
    assert trace.stack("encoder").shape[0] == model.cfg.n_encoder_layers
    with pytest.raises(KeyError, match="no cross attention"):
        trace.stack("cross")
