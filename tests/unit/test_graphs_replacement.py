"""The replacement model is the model: with its error nodes it reproduces the model's logits at every
position, and it is linear in its nodes: each target equals its bias plus the sum of the edges into it,
and an edge is what zeroing its source node changes, computed a second way (a forward difference in
float64 instead of a gradient). On post-norm and pre-norm models, random and briefly trained transcoders."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from explorer.model import functional as fn
from explorer.studies.graphs.attribution import attribute, target_values
from explorer.studies.graphs.hooks import hooked
from explorer.studies.graphs.replacement import Replacement, Step
from explorer.store.checkpoint import load_checkpoint
from explorer.text.encoding import output_ids, source_ids
from support.graph_helpers import STEP, briefly_trained, random_transcoders
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)
from support.numerics import EPS64, float32_atol, in_float64, model_atol
from support.waiting import join

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [ROOT / "checkpoints" / name for name in ("numbers-en-de", "bible-es-en")]
SENTENCES = {"numbers-en-de": ("four hundred and ninety seven", "vier hundert sieben und neunzig"),
             "bible-es-en": ("En el principio creó Dios los cielos y la tierra.",
                             "In the beginning God created the heavens and the earth.")}
NORMS = [pytest.param(False, id="post-norm"), pytest.param(True, id="pre-norm")]


@pytest.fixture(scope="module", params=NORMS)
def model(request):
    return make_model(norm_first=request.param)


def test_scaled_layer_norm_with_its_own_scale_is_layer_norm():
    norm = torch.nn.LayerNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
        norm.bias.uniform_(-1.0, 1.0)
    x = torch.randn(3, 5, 16) * 4 + 1                                                    # [B, L, d]
    with torch.no_grad():
        got = fn.scaled_layer_norm(x, fn.layer_norm_scale(x, norm.eps), norm)
        assert (got - norm(x)).abs().max() <= float32_atol(float(got.abs().max()) + 4, 16 * 4)


@pytest.mark.parametrize("trained", [False, True], ids=["random", "trained"])
def test_with_error_nodes_the_replacement_reproduces_the_logits_at_every_position(model, trained):
    tcs = briefly_trained(model) if trained else random_transcoders(model)
    rep = Replacement(model, tcs, STEP)
    with torch.no_grad():
        own = rep.logits(rep.run(rep.actual(1)))[0]                                       # [T, V]
        wrong = rep.actual(1)
        for key in wrong.errors:
            wrong.errors[key].zero_()
        without = rep.logits(rep.run(wrong))[0]
    atol = model_atol(model, rep.model_logits)
    assert (own - rep.model_logits).abs().max() <= atol
    assert (without - rep.model_logits).abs().max() > 10 * atol             # the error nodes carry something


def _row_atol(model, graph, row: int) -> float:
    """The logit's own rounding, plus the sum of the row's edges (each a float32 gradient product)."""
    size = float(graph.bias[row].abs() + graph.adjacency[row].double().abs().sum())
    return model_atol(model, graph.rep.model_logits) + float32_atol(size, graph.nodes.size)


@pytest.mark.parametrize("foil", [None, 17], ids=["logit", "contrast"])
def test_the_edges_into_each_target_plus_its_bias_are_the_target(model, foil):
    rep = Replacement(model, random_transcoders(model), Step(STEP.src, STEP.prefix, STEP.token, foil))
    graph = attribute(rep, batch=32)
    n = graph.nodes
    assert n.n_features > 50                                                              # random latents fire
    total = graph.bias + graph.adjacency.double().sum(1)                                  # [N]
    for row in [*range(n.n_features), n.logit]:
        assert abs(float(total[row] - graph.value[row])) <= _row_atol(model, graph, row), row
    logits = rep.model_logits[STEP.position]
    assert graph.value[n.logit] == pytest.approx(float(logits[STEP.token] - (logits[foil] if foil else 0)), abs=1e-6)


def test_a_graph_read_without_frozen_norms_does_not_add_up(model):
    """What the linearity test above can see: with the LayerNorms left to compute their own scale, the
    bias plus the edges miss the logit by far more than the tolerance."""
    rep = Replacement(model, random_transcoders(model), STEP)
    rep.scales = {}
    graph = attribute(rep, batch=64)
    row = graph.nodes.logit
    miss = abs(float(graph.bias[row] + graph.adjacency[row].double().sum() - graph.value[row]))
    assert miss > 100 * _row_atol(model, graph, row)


def _zeroed(rep, kind: str, site_or_stack: str, index) -> object:
    sources = rep.actual(1)
    getattr(sources, kind)[site_or_stack][(0, *index)] = 0
    return sources


@torch.no_grad()
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_an_edge_is_the_change_when_its_source_node_is_zeroed(norm_first):
    """In float64, for the strongest edge of each kind into the logit and into a decoder feature (an
    encoder feature's edge reaches it only through cross-attention): the edge equals the target's fall
    when the source node alone is set to 0 in the replacement model."""
    model = in_float64(make_model(norm_first=norm_first))
    rep = Replacement(model, random_transcoders(model), STEP)
    graph = attribute(rep, batch=64)
    n = graph.nodes
    decoder_features = (~n.on_encoder(n.feature_site)).nonzero(as_tuple=True)[0]
    targets = [n.logit, int(decoder_features[0])]
    checked = 0
    for target in targets:
        row = graph.adjacency[target].double()
        kinds = {"feature": (0, n.n_features), "error": (n.error_start, n.token_start),
                 "token": (n.token_start, n.logit)}
        for kind, (lo, hi) in kinds.items():
            if kind == "feature" and target != n.logit:
                lo, hi = 0, int((n.feature_site < n.n_encoder).sum())                     # encoder features only
            source = lo + int(row[lo:hi].abs().argmax())
            assert row[source] != 0, (target, kind)
            sources = _change(rep, n, source)
            rows = torch.tensor([target])
            before = target_values(rep, n, rep.run(rep.actual(1)), rows)[0]
            after = target_values(rep, n, rep.run(sources), rows)[0]
            size = float(row.abs().sum() + graph.bias[target].abs())      # the float64 sums', then the edge's
            atol = float32_atol(size, n.size * 8, eps=EPS64) + float32_atol(abs(float(row[source])), 1)  # float32 cell
            assert abs(float(before - after) - float(row[source])) <= atol, (target, kind)
            checked += 1
    assert checked == 6


def _change(rep, n, source: int):
    """The sentence's node values with node `source` set to 0."""
    if source < n.n_features:
        site = n.sites[int(n.feature_site[source])]
        first = int((n.feature_site < n.feature_site[source]).sum())
        return _zeroed(rep, "acts", site, (source - first,))
    if source < n.token_start:
        e = source - n.error_start
        return _zeroed(rep, "errors", n.sites[int(n.error_site[e])], (int(n.error_pos[e]),))
    ctx = source - n.token_start
    stack, pos = ("encoder", ctx) if ctx < n.src_len else ("decoder", ctx - n.src_len)
    return _zeroed(rep, "embeds", stack, (pos,))


def test_batching_leaves_the_edges_unchanged(model):
    rep = Replacement(model, random_transcoders(model), STEP)
    one, many = attribute(rep, batch=1).adjacency, attribute(rep, batch=50).adjacency
    size = float(one.abs().max())
    assert (one - many).abs().max() <= float32_atol(size, one.shape[0] * 8)


def test_no_edge_runs_backwards(model):
    """An edge only runs from an earlier layer, or from the embeddings: a feature's row is 0 at every node
    of its own layer or later, and a decoder position's at every later prefix position (the causal mask)."""
    rep = Replacement(model, random_transcoders(model), STEP)
    graph = attribute(rep, batch=64)
    n, a = graph.nodes, graph.adjacency
    f_layer = n.feature_site
    for t in range(n.n_features):
        assert not a[t, :n.n_features][f_layer >= f_layer[t]].any()
        assert not a[t, n.error_start:n.token_start][n.error_site >= f_layer[t]].any()
        if f_layer[t] >= n.n_encoder:
            later = (f_layer >= n.n_encoder) & (n.feature_pos > n.feature_pos[t])
            assert not a[t, :n.n_features][later].any()
    source_tokens = a[n.logit, n.token_start:n.token_start + n.src_len]
    assert torch.count_nonzero(source_tokens) == n.src_len                    # every source word reaches the logit


def test_the_callers_transcoders_and_model_are_left_as_they_were(model):
    tcs = random_transcoders(model)
    before = {s: tc.W_enc.clone() for s, tc in tcs.items()}
    attribute(Replacement(model, tcs, STEP), batch=64)
    assert all(torch.equal(tcs[s].W_enc, before[s]) and tcs[s].W_enc.dtype == torch.float32 for s in tcs)
    assert all(p.grad is None for p in model.parameters())
    assert not any(m._forward_hooks for m in model.modules())


def test_a_missing_transcoder_is_refused_in_one_line(model):
    tcs = random_transcoders(model)
    tcs.pop(next(iter(tcs)))
    with pytest.raises(ValueError, match="no transcoder for encoder.layers.0.ffn"):
        Replacement(model, tcs, STEP)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_on_the_shipped_models_the_replacement_is_the_model_at_every_position(path):
    if not (path / "model.safetensors").is_file():
        pytest.skip(f"needs {path.name}")
    ckpt = load_checkpoint(str(path), "cpu")
    model, special = ckpt.model, ckpt.model.cfg.special
    source, target = SENTENCES[path.name]
    src = source_ids(ckpt.tokenizer, source, model.cfg.max_len, special)
    out = output_ids(ckpt.tokenizer, target, model.cfg.max_len, special)
    step = Step(tuple(src), tuple([special.start] + out[:-1]), out[-1])                   # the last position
    rep = Replacement(model, random_transcoders(model, width=256, k=16), step)
    with torch.no_grad():
        own = rep.logits(rep.run(rep.actual(1)))[0]                                       # [T, V]
    assert (own - rep.model_logits).abs().max() <= min(model_atol(model, rep.model_logits), 1e-4)


def test_the_replacements_hooks_answer_only_their_own_thread(model):
    """On a model the app shares, another thread computing while a graph is built gets the model's own
    numbers, bit for bit, and keeps its fast paths."""
    src, prefix = torch.tensor([list(STEP.src)]), torch.tensor([list(STEP.prefix)])
    with torch.no_grad():
        alone = model.logits(src, prefix)
    seen = {}

    def other():
        with torch.no_grad():
            seen["logits"] = model.logits(src, prefix)
        seen["watched"] = model.decoding_watched()

    zero = {name: (lambda _m, _a, out: torch.zeros_like(out)) for name, m in model.named_modules()
            if isinstance(m, torch.nn.LayerNorm)}
    with hooked(model, zero):
        with torch.no_grad():
            assert not torch.equal(model.logits(src, prefix), alone)                      # this thread's are edited
        worker = threading.Thread(target=other)
        worker.start()
        join(worker, "the other thread's forward")
    assert torch.equal(seen["logits"], alone) and seen["watched"] is False
