"""Gates, gradient importance (Michel et al. 2019), W^O-column removal and pruning curves on a tiny model."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.evaluation.scores import corpus_scores
from explorer.studies.heads.importance import HeadRemover, all_heads, gated, gradient_importance, normalize_per_layer, \
    teacher_loss
from explorer.studies.heads.pruning import Curve, importance_order, plan_curves, random_order, removable, score_curves
from explorer.studies.common.sentences import SentenceSet, greedy_texts
from explorer.inspection.hooks import ablate_heads
from explorer.inspection.trace import ATTENTION_KINDS, KINDS
from support.model_helpers import IdTokenizer
from support.numerics import gradient_atol, model_atol

# Gates, ablation hooks and zeroed W^O columns compute the same outputs through other kernels (an explicit
# attention instead of the fused one, a product with zeros): within model_atol (support.numerics), which a
# head removed or kept by mistake exceeds.


def sentences(n: int = 4) -> SentenceSet:
    g = torch.Generator().manual_seed(7)
    src = [torch.randint(4, 40, (3 + i,), generator=g).tolist() + [2] for i in range(n)]
    out = [torch.randint(4, 40, (2 + i,), generator=g).tolist() + [2] for i in range(n)]
    return SentenceSet(src=src, out=out, refs=[" ".join(map(str, o[:-1])) for o in out], forced="reference")


def ones(model) -> dict[str, torch.Tensor]:
    return {kind: torch.ones(ATTENTION_KINDS[kind].n_layers(model.cfg), model.cfg.n_heads) for kind in KINDS}


@torch.no_grad()
def test_gate_one_leaves_the_output_and_gate_zero_is_ablate_heads(model, batch):
    plain = model(*batch)                                                       # [B, T, V]
    atol = model_atol(model, plain)
    with gated(model, ones(model)):
        torch.testing.assert_close(model(*batch), plain, rtol=0, atol=atol)
    for kind in KINDS:
        gates = ones(model)
        gates[kind][1, 2] = 0.0
        with gated(model, gates):
            gated_out = model(*batch)
        with ablate_heads(model, [(kind, 1, 2)]):
            ablated = model(*batch)
        torch.testing.assert_close(gated_out, ablated, rtol=0, atol=atol)
        assert (gated_out - plain).abs().max() > 10 * atol                     # the head mattered


@torch.no_grad()
def test_zeroing_w_o_columns_is_ablate_heads(model, batch):
    remover = HeadRemover(model, IdTokenizer(), sentences())
    heads = [("encoder", 0, 1), ("cross", 1, 3), ("decoder", 1, 0)]
    remover.apply(heads)
    with ablate_heads(model, heads):
        expected = model(*batch)
    atol = model_atol(model, expected)
    torch.testing.assert_close(remover.model(*batch), expected, rtol=0, atol=atol)
    remover.apply([])
    torch.testing.assert_close(remover.model(*batch), model(*batch), rtol=0, atol=atol)


def test_a_head_whose_output_cannot_matter_has_zero_importance(model):
    silenced = copy.deepcopy(model)
    d_head = model.cfg.d_model // model.cfg.n_heads
    with torch.no_grad():
        silenced.decoder.layers[1].cross_attn.w_o.weight[:, 2 * d_head:3 * d_head] = 0
    raw = gradient_importance(silenced, sentences(), batch_size=2)
    assert raw["cross"][1, 2] == 0.0
    assert np.all(np.delete(raw["cross"].ravel(), 1 * model.cfg.n_heads + 2) > 0)
    assert raw["encoder"].shape == (model.cfg.n_encoder_layers, model.cfg.n_heads)


def test_importance_is_per_sentence_absolute_gradient(model):
    """Batched per-sentence gates give the mean of each sentence's own |dL/dxi|."""
    sents = sentences(3)
    together = gradient_importance(model, sents, batch_size=3)
    alone = [gradient_importance(model, SentenceSet([s], [o], [r], "reference"), batch_size=1)
             for s, o, r in zip(sents.src, sents.out, sents.refs)]
    for kind in KINDS:                  # one batch against three: other orders of the backward's sums
        mean = np.mean([a[kind] for a in alone], axis=0)
        np.testing.assert_allclose(together[kind], mean, rtol=0, atol=gradient_atol(model, together[kind], mean))


def test_normalisation_is_l2_within_each_layer():
    raw = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0]])
    out = normalize_per_layer(raw)
    assert np.allclose(out[0], [0.6, 0.8]) and np.all(out[1] == 0)
    assert np.allclose(np.linalg.norm(out[[0, 2]], axis=1), 1.0)


def test_teacher_loss_rises_when_heads_are_removed(model):
    sents = sentences()
    assert teacher_loss(model, sents, all_heads(model, ["cross"])) != pytest.approx(teacher_loss(model, sents))


def test_pruning_curve_starts_at_the_full_models_bleu(model):
    tok, sents = IdTokenizer(), sentences()
    remover = HeadRemover(model, tok, sents)
    normalized = {kind: np.random.default_rng(1).random((2, model.cfg.n_heads)) for kind in KINDS}
    curves = score_curves(plan_curves(normalized, seeds=1, points={"encoder": 2, "decoder": 2, "cross": 2, "all": 3}),
                          remover)
    plain = corpus_scores(greedy_texts(model, tok, sents), sents.refs)
    for curve in curves:
        assert curve.removed[0] == 0 and curve.removed[-1] == len(curve.heads)
        assert curve.bleu[0] == pytest.approx(plain["bleu"]) and curve.chrf[0] == pytest.approx(plain["chrf"])
    with ablate_heads(model, curves[0].heads):
        emptied = corpus_scores(greedy_texts(model, tok, sents), sents.refs)
    assert curves[0].bleu[-1] == pytest.approx(emptied["bleu"])


def test_orders_and_how_many_heads_can_go():
    normalized = {"encoder": np.array([[0.9, 0.1]]), "decoder": np.array([[0.5, 0.2]]), "cross": np.array([[0.3, 0.0]])}
    assert importance_order(normalized, "all")[:3] == [("cross", 0, 1), ("encoder", 0, 1), ("decoder", 0, 1)]
    assert importance_order(normalized, "encoder") == [("encoder", 0, 1), ("encoder", 0, 0)]
    heads = importance_order(normalized, "all")
    assert random_order(heads, 0) == random_order(heads, 0) and sorted(random_order(heads, 3)) == sorted(heads)
    curve = Curve("all", "importance", None, heads, [0, 2, 4, 6], bleu=[30.0, 29.5, 28.0, 29.9])
    assert removable(curve) == 2


def test_a_cancelled_remover_stops_before_its_next_decoding_batch(model):
    from explorer.runtime.progress import Cancelled
    asked = []
    remover = HeadRemover(model, IdTokenizer(), sentences(), stop=lambda: asked.append(1) or len(asked) > 1)
    remover.scores(())                                           # first batch: not cancelled yet
    with pytest.raises(Cancelled):
        remover.scores([("cross", 0, 0)])
    assert len(asked) == 2
