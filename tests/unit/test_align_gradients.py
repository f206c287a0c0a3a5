"""The one fast gradient path (explorer.studies.common.gradients: every target's backward pass batched over one
forward per path point; the alignment scorecard, the Alignment page and the faithfulness scorecard
use it) gives captum's attributions (InputXGradient / IntegratedGradients, one row per target and
path point: piece_attributions(path="captum")) within float32 rounding (support.numerics: gradient_atol
for attributions, model_atol for deltas): post-LN and pre-LN tiny
models and both shipped models, however targets and path points are cut into batches, with captum's
convergence delta; and the scorecard's JSON is the same on either path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.studies.align.attribution import piece_attributions, row_bytes
from explorer.studies.align.gold import read_gold
from explorer.studies.common.gradients import (attributions, batch_shape, forced_log_probs, hidden_states, path_points,
                                      target_bytes, teacher_inputs)
from explorer.studies.align.numbers_gold import number_gold
from explorer.studies.align.pairs import ModelPair, model_pair
from explorer.files.places import REPO_ROOT
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)
from support.numerics import cast_logprob_atol, gradient_atol, model_atol

SRC, OUT = [5, 9, 12, 7, 30, 3], [11, 4, 17, 8, 21, 3]
METHODS = ["grad-x-input", "integrated-gradients"]


@pytest.fixture(scope="module", params=[False, True], ids=["post-LN", "pre-LN"])
def model(request):
    return make_model(norm_first=request.param)


@pytest.mark.parametrize("method", METHODS)
def test_fast_path_equals_captum_one_row_at_a_time(model, method):
    pair = ModelPair(gold=None, src_ids=SRC, out_ids=OUT, src_groups=[], tgt_groups=[])
    reference, ref_delta = piece_attributions(model, pair, method, steps=4, with_delta=True, path="captum")
    # captum's passes against batched ones: other shapes, other orders of the same sums: attributions within
    # gradient_atol, deltas (which hold F(x) - F(0), two log-probs) within model_atol
    atol, delta_atol = gradient_atol(model, reference), model_atol(model, reference, ref_delta)
    one_row, target = row_bytes(model.cfg, len(SRC), len(OUT)), target_bytes(model.cfg, len(SRC), len(OUT))
    two = one_row + 2 * target                  # groups of 2 targets, one path point a pass
    assert batch_shape(model.cfg, len(SRC), len(OUT), len(OUT), 4, two) == (2, 1)
    for budget in (1 << 30, two, 1):            # all at once; 2 targets and 1 point a pass; 1 and 1
        fast, delta = piece_attributions(model, pair, method, steps=4, with_delta=True, budget=budget)
        assert fast.shape == (len(OUT), len(SRC)) and delta.shape == (len(OUT),)
        assert np.abs(fast - reference).max() < atol, budget
        assert np.abs(delta - ref_delta).max() < delta_atol, budget
    assert np.abs(reference).max() > 100 * atol                                          # not trivially zero
    some = attributions(model, SRC, OUT, method, steps=4, targets=[4, 1, 4], budget=two)
    assert np.abs(some - reference[[4, 1, 4]]).max() < atol


@pytest.fixture(scope="module")
def shipped():
    from explorer.store.checkpoint import load_checkpoint

    golds = {"bible-es-en": read_gold(REPO_ROOT / "gold" / "bible-es-en.align")[2],
             "numbers-en-de": number_gold(493_218)}
    found = {}
    for name, gold in golds.items():
        ckpt = load_checkpoint(REPO_ROOT / "checkpoints" / name)
        found[name] = (ckpt.model, model_pair(ckpt.model, ckpt.tokenizer, gold))
    return found


@pytest.mark.parametrize("name", ["bible-es-en", "numbers-en-de"])
@pytest.mark.parametrize("method", METHODS)
def test_fast_path_equals_captum_on_the_shipped_models(shipped, name, method):
    model, mp = shipped[name]
    targets = [0, 1, len(mp.out_ids) - 1]                      # a few targets: captum's path is the slow one
    reference, ref_delta = piece_attributions(model, mp, method, steps=4, with_delta=True, targets=targets,
                                              path="captum")
    fast, delta = piece_attributions(model, mp, method, steps=4, with_delta=True, targets=targets)
    atol, delta_atol = gradient_atol(model, reference), model_atol(model, reference, ref_delta)   # as above
    assert np.abs(reference).max() > 100 * atol
    assert np.abs(fast - reference).max() < atol
    assert np.abs(delta - ref_delta).max() < delta_atol


def test_path_points_are_captums_and_integrate_to_one():
    alphas, weights = path_points("integrated-gradients", 8)
    assert len(alphas) == len(weights) == 8 and all(0 < a < 1 for a in alphas)
    assert abs(sum(weights) - 1) < 1e-9
    assert path_points("grad-x-input", 8) == ([1.0], [1.0])
    pair = ModelPair(gold=None, src_ids=SRC, out_ids=OUT, src_groups=[], tgt_groups=[])
    with pytest.raises(ValueError, match="attribution method"):
        attributions(make_model(), SRC, OUT, "lime")
    with pytest.raises(ValueError, match="attribution path"):
        piece_attributions(make_model(), pair, "grad-x-input", path="fast")
    with pytest.raises(ValueError, match="target positions"):
        attributions(make_model(), SRC, OUT, "grad-x-input", targets=[len(OUT)])


def test_integrated_gradients_are_complete():
    """Their sum over the source is F(e) - F(0) for each target (a smooth activation, so that the
    Gauss-Legendre rule converges), and the delta is the gap left."""
    model = make_model(activation="gelu").double()
    attr, delta = attributions(model, SRC, OUT, "integrated-gradients", steps=32, with_delta=True)  # [T, S], [T]
    src, tgt_in, out = teacher_inputs(model, SRC, OUT)
    e = model.encoder.embed.lookup(src) * model.encoder.embed.scale                          # [1, S, d]
    every = torch.arange(len(OUT))
    with torch.no_grad():
        hidden = hidden_states(model, src, tgt_in, torch.cat([e, torch.zeros_like(e)]))      # [2, T, d]
        ends = forced_log_probs(model, hidden, out[0, every])                                # [2, T]
    change = (ends[0] - ends[1]).numpy()
    # the quadrature's error (32 Gauss-Legendre points on a smooth function), far above float64 rounding
    np.testing.assert_allclose(attr.sum(axis=1), change, rtol=0, atol=1e-4)
    # the delta's two log-probabilities and these two, each rounded through the generator's float32 cast
    np.testing.assert_allclose(attr.sum(axis=1) - delta, change, rtol=0, atol=4 * cast_logprob_atol(model))


def _floats(a) -> list[float]:
    if isinstance(a, dict):
        return [x for v in a.values() for x in _floats(v)]
    if isinstance(a, list):
        return [x for v in a for x in _floats(v)]
    return [a] if isinstance(a, float) else []


def _close(a, b, atol: float, where="") -> None:
    """The same JSON, floats within `atol` (the two paths round differently in the last digits only)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _close(a[key], b[key], atol, f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, atol, f"{where}[{i}]")
    elif isinstance(a, float):
        assert abs(a - b) <= atol, (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_the_scorecard_is_the_same_on_either_path():
    from explorer.studies.align.gold import GoldPair
    from explorer.studies.align.scorecard import AlignSettings, run_scorecard
    from support.decoding_helpers import StandInTokenizer, random_model

    model, tok = random_model(seed=3, d_model=16, n_heads=2, d_ff=32), StandInTokenizer()
    words = ["abcde", "fgab", "dcbaef", "hgfe"]
    gold = [GoldPair(list(w), list(reversed(w)), frozenset((i, len(w) - 1 - i) for i in range(len(w))))
            for w in words]
    settings = AlignSettings(pairs=4, attribution_pairs=4, ig_steps=4, eflomal=False)
    fast, reference = (run_scorecard(model, tok, gold, settings, attribution_path=path)
                       for path in ("batched", "captum"))
    for result in (fast, reference):
        del result["seconds"], result["stage_seconds"]
    assert fast["integrated_gradients"]["targets"] > 10
    assert {r["aligner"] for r in fast["rows"]} >= {"grad-x-input", "integrated-gradients"}
    # sums and means of attributions from other batch shapes: model_atol with the largest number in play
    _close(fast, reference, model_atol(model, _floats(reference)))
