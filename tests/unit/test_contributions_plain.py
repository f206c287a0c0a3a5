"""A second ALTI+, written plainly (numpy, float64, a loop per head, query and key, its own forward pass
from the model's parameters), agrees with explorer.studies.contributions within 1e-8 on a tiny model, post-LN and
pre-LN: every layer's contribution matrices, the encoder rollout, the decoder rollout and the source
shares. It shares no code with the library beyond reading the parameters and the embedding rows."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.studies.contributions import sentence_contributions
from support.model_helpers import make_model

SRC, OUT = [5, 9, 12, 7, 30, 3], [11, 4, 17, 8, 3]


def p(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def norm(u: np.ndarray, ln) -> np.ndarray:
    mean = u.mean()
    var = ((u - mean) ** 2).mean()
    return p(ln.weight) * (u - mean) / math.sqrt(var + ln.eps) + p(ln.bias)


def linear(x: np.ndarray, layer) -> np.ndarray:
    return x @ p(layer.weight).T + p(layer.bias)


def plain_block(x: np.ndarray, keys_from: np.ndarray | None, attn, residual, causal: bool):
    """One attention block, done by hand: (its output [T, d], its ALTI contributions [T, K(+1)]).
    keys_from: the encoder memory for cross-attention, None for self-attention."""
    pre = residual.norm_first
    inp = np.stack([norm(r, residual.norm) for r in x]) if pre else x
    kv = inp if keys_from is None else keys_from
    n_q, n_k, d = x.shape[0], kv.shape[0], x.shape[1]
    heads, dh = attn.n_heads, d // attn.n_heads
    q, k, v = linear(inp, attn.w_q), linear(kv, attn.w_k), linear(kv, attn.w_v)
    w_o = p(attn.w_o.weight)
    cross = keys_from is not None
    width = n_k + 1 if cross else n_k
    vectors = np.zeros((n_q, width, d))
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        for i in range(n_q):
            scores = [q[i, cols] @ k[j, cols] / math.sqrt(dh) if (not causal or j <= i) else -np.inf
                      for j in range(n_k)]
            top = max(scores)
            e = [math.exp(s - top) for s in scores]
            for j in range(n_k):
                vectors[i, j] += e[j] / sum(e) * (w_o[:, cols] @ v[j, cols])
    for i in range(n_q):
        vectors[i, n_k if cross else i] += x[i]
    bias = np.tile(p(attn.w_o.bias), (n_q, 1))
    if not pre:
        for i in range(n_q):
            u = vectors[i].sum(axis=0) + bias[i]
            s = math.sqrt(((u - u.mean()) ** 2).mean() + residual.norm.eps)
            g = p(residual.norm.weight)
            for j in range(width):
                vectors[i, j] = g * (vectors[i, j] - vectors[i, j].mean()) / s
            bias[i] = g * (bias[i] - bias[i].mean()) / s + p(residual.norm.bias)
    out = vectors.sum(axis=1) + bias
    c = np.zeros((n_q, width))
    for i in range(n_q):
        for j in range(width):
            if causal and j > i:
                continue
            c[i, j] = max(0.0, np.abs(out[i]).sum() - np.abs(out[i] - vectors[i, j]).sum())
        c[i] /= c[i].sum()
    return out, c


def plain_ffn(x: np.ndarray, ffn, residual) -> np.ndarray:
    rows = []
    for r in x:
        inner = norm(r, residual.norm) if residual.norm_first else r
        y = linear(np.maximum(linear(inner, ffn.w_1), 0.0), ffn.w_2)
        rows.append(r + y if residual.norm_first else norm(r + y, residual.norm))
    return np.stack(rows)


def plain_alti(model, src: list[int], out: list[int]) -> dict:
    assert model.cfg.activation == "relu"
    with torch.no_grad():
        x = p(model.encoder.embed(torch.tensor([src]))[0])
        y = p(model.decoder.embed(torch.tensor([[model.cfg.decoder_start_id] + out[:-1]]))[0])
    enc = []
    for layer in model.encoder.layers:
        x, c = plain_block(x, None, layer.self_attn, layer.attn_block, causal=False)
        x = plain_ffn(x, layer.ffn, layer.ffn_block)
        enc.append(c)
    if model.cfg.norm_first:
        x = np.stack([norm(r, model.encoder.norm) for r in x])
    n_s, n_t = len(src), len(out)
    roll = np.eye(n_s)
    for c in enc:
        roll = np.array([[sum(c[i, k] * roll[k, m] for k in range(n_s)) for m in range(n_s)] for i in range(n_s)])
    dec_self, cross = [], []
    state = np.hstack([np.zeros((n_t, n_s)), np.eye(n_t)])
    for layer in model.decoder.layers:
        y, cs = plain_block(y, None, layer.self_attn, layer.self_block, causal=True)
        y, cc = plain_block(y, x, layer.cross_attn, layer.cross_block, causal=False)
        y = plain_ffn(y, layer.ffn, layer.ffn_block)
        dec_self.append(cs)
        cross.append(cc)
        new = np.zeros_like(state)
        for i in range(n_t):
            for m in range(n_s + n_t):
                through_self = sum(cs[i, j] * state[j, m] for j in range(n_t))
                through_memory = sum(cc[i, k] * roll[k, m] for k in range(n_s)) if m < n_s else 0.0
                new[i, m] = cc[i, n_s] * through_self + through_memory
        state = new
    return {"encoder": np.stack(enc), "decoder_self": np.stack(dec_self), "cross": np.stack(cross),
            "encoder_rollout": roll, "rollout_last": state, "source_share": state[:, :n_s].sum(axis=1)}


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_the_plain_implementation_agrees_within_1e_8(norm_first):
    model = make_model(norm_first=norm_first).double()
    with torch.no_grad():                                  # norms away from 1 / 0, as after training
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
    plain = plain_alti(model, SRC, OUT)
    lib = sentence_contributions(model, SRC, OUT)
    for name in ("encoder", "decoder_self", "cross", "encoder_rollout"):
        assert np.abs(getattr(lib, name) - plain[name]).max() < 1e-8, name
    assert np.abs(lib.rollout[-1] - plain["rollout_last"]).max() < 1e-8
    assert np.abs(lib.source_share - plain["source_share"]).max() < 1e-8
    assert 0.05 < plain["source_share"].min() and plain["source_share"].max() < 0.95     # not a degenerate case
