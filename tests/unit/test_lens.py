"""The lenses are exact where they claim to be (explorer.studies.lens).

DecoderLens at the last encoder layer is the normal translation (ids equal, log-probs within 1e-5,
greedy and beam); at a shallower depth k it is the translation of the same model with its encoder
cut after layer k (a second, plain construction). The logit lens at the last decoder layer is the
model's own log-probs (within 1e-6); at layer k it is the log-probs of the model with its decoder
cut after layer k. All on a tiny post-LN and pre-LN model, a base-size model and an imported
random Marian model.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.decoding import beam_search, greedy_search
from explorer.decoding.core import as_batch
from explorer.studies.common.sentences import SentenceSet
from explorer.studies.lens.decoder_lens import check_layers, decoder_lens, lens_translations
from explorer.studies.lens.logit_lens import logit_lens, set_agreement
from explorer.text.encoding import decoder_inputs, source_ids
from support.layer_models import SHORT, SHORT_BEAM, base_size_model, imported_marian
from support.marian_helpers import TEST_SOURCES
from support.model_helpers import make_model
from support.numerics import model_atol

SOURCES = [[5, 6, 7, 8, 9, 3], [10, 11, 12, 3]]


@pytest.fixture(scope="module")
def base():
    return base_size_model()


@pytest.fixture(scope="module")
def marian():
    return imported_marian()


def marian_sources(model, tokenizer):
    return [source_ids(tokenizer, s, model.cfg.max_len, model.cfg.special) for s in TEST_SOURCES[:2]]


def cases(request):
    if request.param == "base":
        return request.getfixturevalue("base"), [[17, 4000, 58000, 3], [900, 3]]
    if request.param == "marian":
        model, tokenizer = request.getfixturevalue("marian")
        return model, marian_sources(model, tokenizer)
    return make_model(norm_first=request.param == "tiny pre-LN"), SOURCES


@pytest.fixture(params=["tiny post-LN", "tiny pre-LN", "base", "marian"])
def case(request):
    return cases(request)


def same_decoded(lensed, plain, model):
    """The same outputs; log-probs within model_atol (the lens batches layers and sentences otherwise, so
    adds in other orders; another layer's log-probs differ by > 1e-2)."""
    for a, b in zip(lensed, plain):
        assert len(a.hypotheses) == len(b.hypotheses)
        for ha, hb in zip(a.hypotheses, b.hypotheses):
            assert ha.ids == hb.ids
            np.testing.assert_allclose(ha.token_logprobs, hb.token_logprobs, atol=model_atol(model, hb.token_logprobs),
                                       rtol=0)


def test_decoder_lens_at_the_last_layer_is_the_translation(case):
    model, src = case
    last = model.cfg.n_encoder_layers
    same_decoded(decoder_lens(model, src, SHORT, [last])[0], greedy_search(model, src, SHORT), model)
    same_decoded(decoder_lens(model, src, SHORT_BEAM, [last])[0], beam_search(model, src, SHORT_BEAM), model)
    # the whole sweep in one batch: its last row is the translation too
    same_decoded(decoder_lens(model, src, SHORT)[-1], greedy_search(model, src, SHORT), model)


def cut_encoder(model, k):
    """The same weights with the encoder stopped after layer k (k = 0: embeddings, then the final norm)."""
    cut = copy.deepcopy(model)
    cut.encoder.layers = torch.nn.ModuleList(list(cut.encoder.layers)[:k])
    return cut


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_lens_at_depth_k_is_the_model_with_its_encoder_cut_after_k(norm_first):
    model = make_model(norm_first=norm_first)
    lensed = decoder_lens(model, SOURCES, SHORT_BEAM)
    for k in range(model.cfg.n_encoder_layers):
        same_decoded(lensed[k], beam_search(cut_encoder(model, k), SOURCES, SHORT_BEAM), model)


def forced_log_probs(model, src, out_ids):
    with torch.inference_mode():
        batch, _ = as_batch([src], model)
        tgt_in = torch.tensor([decoder_inputs(out_ids, model.cfg.special)])
        return model(batch, tgt_in)[0]                                         # [T, V]


def test_logit_lens_at_the_last_layer_is_the_models_log_probs(case):
    model, src = case
    out = greedy_search(model, src[:1], SHORT)[0].best.ids
    lens = logit_lens(model, None, src[0], out, top_k=3)
    final = forced_log_probs(model, src[0], out)                               # [T, V]
    atol = model_atol(model, final)                     # the lens's batch of layers against one forward
    np.testing.assert_allclose(lens.top_logprobs[-1], final.topk(3).values.numpy(), atol=atol, rtol=0)
    # an id's rank is decided where it stands more than twice the tolerance from its neighbours: two values
    # within it may come in either order from a correct kernel (the base model's gaps are 0.1-0.35 of it)
    values, ids = final.topk(4)                                                   # [T, 4]: one past the top 3
    gaps = (values[:, :-1] - values[:, 1:]).numpy()                               # [T, 3]
    decided = (gaps > 2 * atol) & np.c_[np.ones(len(gaps), bool), gaps[:, :-1] > 2 * atol]   # [T, 3]
    assert decided.any()                                                          # the check has something to check
    np.testing.assert_array_equal(lens.top_ids[-1][decided], ids[:, :3].numpy()[decided])
    first = decided[:, 0]
    assert (np.array(lens.final_ids)[first] == final.argmax(-1).numpy()[first]).all()
    assert (lens.final_rank[-1][first] == 1).all()
    np.testing.assert_allclose(lens.final_logprob[-1], final.max(-1).values.numpy(), atol=atol, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_logit_lens_at_layer_k_is_the_model_with_its_decoder_cut_after_k(norm_first):
    model = make_model(norm_first=norm_first)
    out = [7, 8, 9, 10, 3]
    lens = logit_lens(model, None, SOURCES[0], out, top_k=5)
    final = forced_log_probs(model, SOURCES[0], out).argmax(-1)                # [T]
    for k in range(1, model.cfg.n_decoder_layers + 1):
        cut = copy.deepcopy(model)
        cut.decoder.layers = torch.nn.ModuleList(list(cut.decoder.layers)[:k])
        lp = forced_log_probs(cut, SOURCES[0], out)                            # [T, V]
        np.testing.assert_allclose(lens.top_logprobs[k - 1], lp.topk(5).values.numpy(), atol=model_atol(model, lp),
                                   rtol=0)
        chosen = lp.gather(1, final.unsqueeze(1))                              # [T, 1]
        np.testing.assert_array_equal(lens.final_rank[k - 1], ((lp > chosen).sum(1) + 1).numpy())


def test_set_agreement_is_the_sentences_agreement_pooled():
    model = make_model(seed=7)
    outs = [[7, 8, 9, 3], [11, 12, 13, 14, 15, 3]]
    sents = SentenceSet(src=SOURCES, out=outs, refs=["", ""], forced="reference")
    pooled = set_agreement(model, sents, batch_size=2)
    lenses = [logit_lens(model, None, s, o) for s, o in zip(SOURCES, outs)]
    agree = sum((lens.final_rank == 1).sum(axis=1) for lens in lenses) / sum(len(o) for o in outs)
    np.testing.assert_allclose(pooled["top1_agreement"], agree, atol=1e-12)
    assert pooled["top1_agreement"][-1] == 1.0 and pooled["positions"] == 10


def test_text_level_lens_on_an_imported_model(marian):
    model, tokenizer = marian
    rows = lens_translations(model, tokenizer, TEST_SOURCES[0], SHORT)
    assert [r.label for r in rows] == ["embeddings"] + [f"layer {k}" for k in range(1, model.cfg.n_encoder_layers + 1)]
    plain = greedy_search(model, [marian_sources(model, tokenizer)[0]], SHORT)[0].best
    assert rows[-1].ids == plain.ids and rows[-1].text == tokenizer.decode(plain.output_ids, side="tgt")
    assert lens_translations(model, tokenizer, "   ", SHORT) == []


def test_bad_layers_and_arguments_are_refused_with_a_message():
    model = make_model()
    with pytest.raises(ValueError, match=r"encoder layers must be in \[0, 2\]"):
        check_layers(model, [3])
    with pytest.raises(ValueError, match="encoder layers"):
        decoder_lens(model, SOURCES, SHORT, [])
    with pytest.raises(ValueError, match="top_k must be in"):
        logit_lens(model, None, SOURCES[0], [4, 3], top_k=0)
    with pytest.raises(ValueError, match="forced output needs"):
        logit_lens(model, None, SOURCES[0], [])
