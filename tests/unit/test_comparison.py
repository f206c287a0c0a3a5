"""Checkpoint comparison and training figures: the numbers equal the library's own computations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from explorer.evaluation import comparison as cmp
from explorer.store.checkpoint import load_checkpoint
from explorer.store.catalog import list_checkpoints
from explorer.config import DecodeConfig
from explorer.decoding import attention_trace, score_targets, translate
from explorer.decoding.translate import encode_source
from explorer.plots import training as plots
from explorer.plots.style import head_grid
from explorer.store.metrics import curves_from_records
from explorer.training.schedule import noam_curve
from support.numerics import model_atol
from support.training_fixtures import SENTENCE, build_runs, make_model, numbers_pairs

GREEDY = DecodeConfig(strategy="greedy")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    built = build_runs(tmp_path_factory.mktemp("runs"))
    yield built
    built["holder"].kill()
    built["holder"].wait()


@pytest.fixture(scope="module")
def pair(runs):
    return load_checkpoint(runs["ck10"]), load_checkpoint(runs["ck20"])


def test_scores_under_both_models_equal_score_targets(pair):
    a, b = pair
    output = translate(a.model, a.tokenizer, SENTENCE, GREEDY).text
    s = cmp.score_under_both(a, b, SENTENCE, output)
    src = encode_source(a.tokenizer, SENTENCE, a.config.max_len)[0]
    out_ids = a.tokenizer.encode(output, side="tgt")
    for model, lps in ((a.model, s.lp_a), (b.model, s.lp_b)):     # other batches: within model_atol
        want = score_targets(model, [src], [out_ids])[0].token_logprobs
        assert lps == pytest.approx(want, abs=model_atol(model, want))
    assert s.aligned and len(s.lp_a) == len(out_ids) + 1            # EOS scored too
    assert s.lp_a != pytest.approx(s.lp_b, abs=1e-2)                # the models really differ
    lp_a, lp_b = cmp.score_ids_under_both(a, b, src, out_ids + [3])
    assert lp_a == pytest.approx(s.lp_a, abs=model_atol(a.model, s.lp_a))
    assert lp_b == pytest.approx(s.lp_b, abs=model_atol(b.model, s.lp_b))


def test_attention_difference_is_b_minus_a_per_layer_and_head(pair):
    a, b = pair
    src = encode_source(a.tokenizer, SENTENCE, a.config.max_len)[0]
    out = translate(a.model, a.tokenizer, SENTENCE, GREEDY).best.ids
    ta, tb = attention_trace(a.model, a.tokenizer, src, out), attention_trace(b.model, b.tokenizer, src, out)
    for kind in ("encoder", "decoder", "cross"):
        diff = cmp.attention_difference(ta, tb, kind)
        assert diff.shape == (a.config.n_decoder_layers, a.config.n_heads) + ta.attention(kind, 0).shape[2:]
        for layer in range(diff.shape[0]):
            np.testing.assert_allclose(diff[layer], tb.attention(kind, layer)[0] - ta.attention(kind, layer)[0])
        assert np.abs(diff).max() > 1e-4
    other = attention_trace(b.model, b.tokenizer, src[:-2] + [3], out)
    with pytest.raises(cmp.ComparisonError):
        cmp.attention_difference(ta, other, "cross")


def test_param_change_is_relative_norm_per_layer(pair, runs):
    a, b = pair
    change = dict(cmp.param_change(a.model, b.model))
    assert "encoder.layers.0" in change and "decoder.layers.1" in change
    pa, pb = a.model.state_dict(), b.model.state_dict()
    names = [n for n, _ in a.model.named_parameters() if n.startswith("decoder.layers.1.")]
    num = torch.sqrt(sum(((pb[n] - pa[n]).double() ** 2).sum() for n in names))
    den = torch.sqrt(sum((pa[n].double() ** 2).sum() for n in names))
    assert change["decoder.layers.1"] == pytest.approx(float(num / den), rel=1e-9)
    assert all(v == 0 for _, v in cmp.param_change(a.model, a.model))
    wider = make_model(runs["tokenizer"], seed=3, d_ff=256)
    with pytest.raises(cmp.ComparisonError):
        cmp.param_change(a.model, wider)


def test_test_scores_equal_sacrebleu_on_translate_outputs(pair):
    a, _ = pair
    pairs, where = cmp.test_pairs(a.path, a.meta, n=12)
    assert where.endswith("test.tsv") and len(pairs) == 12
    res = cmp.test_scores(a.model, a.tokenizer, pairs)
    hyps = [translate(a.model, a.tokenizer, p.src, GREEDY).text for p in pairs]
    refs = [p.tgt for p in pairs]
    assert res["hyps"] == hyps
    assert res["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert res["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)


def test_test_pairs_fall_back_to_the_training_data(pair):
    _, b = pair                                          # saved without test.tsv
    pairs, where = cmp.test_pairs(b.path, b.meta, n=5)
    assert where == "test split of numbers" and [p.src for p in pairs] == [p.src for p in numbers_pairs(5)]
    with pytest.raises(cmp.ComparisonError):
        cmp.test_pairs(b.path, {"training": {}}, n=5)


def test_checkpoint_rows_read_dev_bleu_from_metrics_and_flag_damage(runs):
    rows = {r["checkpoint"]: r for r in cmp.checkpoint_rows(list_checkpoints(runs["root"]))}
    assert rows["finished@10"]["dev BLEU"] == 5.0 and rows["finished@20"]["dev BLEU"] == 12.5
    assert rows["finished@20"]["step"] == 20 and rows["finished@20"]["run"] == "finished"
    assert rows["finished@10"]["params (M)"] > 0
    damaged = [r for r in rows.values() if r["problem"]]
    assert len(damaged) == 1 and "model.safetensors" in damaged[0]["problem"]
    assert cmp._test_bleu({"test": {"greedy": {"bleu": 1.0}, "beam5": {"bleu": 2.5}}}) == 2.5
    assert cmp._short("runs/numbers/checkpoints/step_000300") == "numbers@300"


def test_same_tokenizer(runs, tmp_path):
    tok = runs["tokenizer"]
    assert cmp.same_tokenizer(tok, type(tok)(tok.model_bytes()))
    other = type(tok).train(["a b c d e"] * 5, ["f g h i"] * 5, str(tmp_path), vocab_size=12, model_type="word")
    assert not cmp.same_tokenizer(tok, other)


# ---- figures and curves ------------------------------------------------------------------------------
def test_smoothed_loss_equals_pytorch_label_smoothing():
    vocab, eps, target = 7, 0.2, 2
    for p in (0.1, 0.5, 0.9):
        probs = torch.full((vocab,), (1 - p) / (vocab - 1))
        probs[target] = p
        want = F.cross_entropy(probs.log()[None], torch.tensor([target]), label_smoothing=eps)
        assert plots.smoothed_loss(np.array([p]), vocab, eps)[0] == pytest.approx(float(want), rel=1e-5)
    grid = np.linspace(0.01, 0.999, 2000)
    best = grid[np.argmin(plots.smoothed_loss(grid, vocab, eps))]
    assert best == pytest.approx(1 - eps + eps / vocab, abs=1e-3)


def test_curves_keep_the_latest_segment_and_estimate_eta():
    recs = [{"kind": "train", "step": s, "loss": 1.0, "lr": 0.1, "elapsed": float(s)} for s in (10, 20, 30)]
    recs += [{"kind": "train", "step": s, "loss": 0.5, "lr": 0.1, "elapsed": float(s - 20)} for s in (30, 40)]
    recs += [{"kind": "eval", "step": 20, "bleu": 3.0, "samples": [{"src": "x", "ref": "y", "hyp": "z"}]},
             {"kind": "train", "step": "bad"}, {"kind": "eval", "step": 40, "bleu": "n/a"}]
    c = curves_from_records(recs)
    assert c.step.tolist() == [10, 20, 30, 40] and c.loss.tolist() == [1.0, 1.0, 0.5, 0.5]
    assert c.elapsed.tolist() == [10.0, 20.0, 30.0, 40.0]          # resumed segment made cumulative
    assert np.isnan(c.bleu[-1]) and c.samples == [{"src": "x", "ref": "y", "hyp": "z"}]
    assert c.eta_seconds(100) == pytest.approx(60.0)
    assert curves_from_records([]).eta_seconds(100) is None


def test_figures_carry_the_data():
    c = curves_from_records([{"kind": "train", "step": s, "loss": 1.0 / s, "lr": 1e-3, "ppl": 2.0,
                                    "tokens_per_s": 10.0, "elapsed": s} for s in (1, 2, 3)])
    x = np.arange(1, 4)
    fig = plots.training_figure(c, (x, noam_curve(x, 128, 1.0, 2)))
    planned = next(t for t in fig.data if t.name == "planned LR")
    np.testing.assert_allclose(planned.y, noam_curve(x, 128, 1.0, 2))
    w = np.random.default_rng(0).random((2, 3, 4, 5))
    grid = head_grid(w - 0.5, "t", diverging=True, q_tokens=list("wxyz"), k_tokens=list("a<cde"))
    assert len(grid.data) == 6
    np.testing.assert_allclose(np.asarray(grid.data[4].z, dtype=float), w[1, 1] - 0.5, atol=5e-4)
    assert grid.data[4].customdata[1][1] == "x → &lt;"                     # tokens on hover, escaped
    limit = float(np.abs(w - 0.5).max())
    assert (grid.layout.coloraxis.cmin, grid.layout.coloraxis.cmax) == pytest.approx((-limit, limit))
    assert plots.param_change_figure(["a", "b"], [0.1, 0.2]).data[0].y == (0.1, 0.2)


def test_a_comparison_opens_on_the_checkpoint_in_use_and_its_closest_other():
    from explorer.evaluation.comparison import default_pair
    from explorer.store.catalog import CheckpointInfo

    def info(name, src, tgt, d, run=None, step=None):
        training = {"run": run, "step": step} if run else {}
        return CheckpointInfo(name, Path("/ckpts") / name, meta={"src_lang": src, "tgt_lang": tgt,
                                                                  "model": {"d_model": d}, "training": training})

    bible = info("bible-es-en", "es", "en", 256, run="bible", step=3757)
    imported = info("opus-es-en", "es", "en", 512)
    numbers = info("numbers-en-de", "en", "de", 128, run="numbers", step=900)
    n300 = info("numbers-step300", "en", "de", 128, run="numbers", step=300)
    n600 = info("numbers-step600", "en", "de", 128, run="numbers", step=600)
    n1200 = info("numbers-step1200", "en", "de", 128, run="numbers", step=1200)
    small = info("numbers-small", "en", "de", 64)
    listed = [bible, imported, n1200, n300, numbers, small, n600]
    at = lambda c: str(c.path)  # noqa: E731
    assert default_pair(listed, at(numbers)) == (4, 6)        # the latest earlier step of its own run
    assert default_pair(listed, at(n300)) == (3, 2)           # none earlier: the run's latest
    assert default_pair(listed, at(small)) == (5, 2)          # no run: same languages (same shape first)
    assert default_pair(listed, at(bible)) == (0, 1)          # same languages, another shape
    assert default_pair([bible, numbers], at(numbers)) == (1, 0)   # nothing close: the other one
    assert default_pair(listed, "/not/listed")[0] == 0 and default_pair([bible], at(bible)) == (0, 0)
