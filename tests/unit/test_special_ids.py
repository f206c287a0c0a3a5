"""Special ids come from the model's config (pad, eos, unk, decoder start), not from constants:
decoding, teacher forcing and text encoding with Marian's ids (eos 0, unk 1, pad = last id, the
decoder starting with pad), and the defaults keep this project's ids."""
from __future__ import annotations

import pytest
import torch

from explorer.config import DecodeConfig, ModelConfig
from explorer.decoding import beam_search, greedy_search, score_targets
from explorer.decoding.core import as_batch, check_prefix, constrain, special_ids
from explorer.text import encoding
from explorer.text.special import BOS_ID, DEFAULT_IDS, EOS_ID, PAD_ID, UNK_ID, SpecialIds
from support.decoding_helpers import VOCAB, random_model

MARIAN = dict(eos_id=0, unk_id=1, pad_id=VOCAB - 1, decoder_start_id=VOCAB - 1)
PAD, EOS = VOCAB - 1, 0


def marian_model(**bias: float):
    """A random model with Marian's ids whose logits bias makes the given ids ({id: bias}) likely."""
    model = random_model(final_logits_bias=True, **MARIAN)
    with torch.no_grad():
        for token, value in bias.items():
            model.generator.proj.bias[int(token.lstrip("t"))] = value
    return model


def test_defaults_are_the_constants():
    cfg = ModelConfig()
    assert cfg.special == DEFAULT_IDS == SpecialIds(pad=PAD_ID, unk=UNK_ID, start=BOS_ID, eos=EOS_ID)
    assert DEFAULT_IDS.never_output == (PAD_ID, BOS_ID) and DEFAULT_IDS.before_min_len == (PAD_ID, BOS_ID, EOS_ID)
    marian = ModelConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, **MARIAN).special
    assert marian.never_output == (PAD,) and marian.before_min_len == (PAD, EOS)   # start == pad: once


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_decoding_stops_at_the_configured_eos_and_never_writes_pad(search):
    # id 3 (this project's EOS) is an ordinary token here; pad (= the start id) is the likeliest of all
    model = marian_model(t0=50.0, t3=40.0, t23=100.0)
    cfg = DecodeConfig(strategy=search, beam_size=2, n_best=2, min_len=2, length_penalty="none")
    run = greedy_search if search == "greedy" else beam_search
    best = run(model, [[5, 6, 7, EOS]], cfg)[0].best
    assert best.ids == [3, 3, EOS] and best.finished and best.output_ids == [3, 3]
    assert run(model, [[5, 6, 7, EOS]], DecodeConfig(strategy=search, beam_size=2))[0].best.ids == [EOS]


def test_beam_trace_bans_the_configured_ids():
    model = marian_model(t23=100.0)
    decoded = beam_search(model, [[5, 6, EOS]], DecodeConfig(beam_size=2, min_len=3, max_len_b=4),
                          prefix=[7, 8], trace=True)[0]
    assert PAD not in decoded.best.ids
    assert decoded.trace is not None


def test_the_decoder_starts_with_the_configured_start_id():
    model = marian_model()
    fed = []
    handle = model.decoder.register_forward_pre_hook(lambda module, args: fed.append(args[0].clone()))
    try:
        greedy_search(model, [[5, 6, EOS]], DecodeConfig(strategy="greedy", max_len_b=2))
        score_targets(model, [[5, 6, EOS], [7, EOS]], [[4, 5], [6]])
    finally:
        handle.remove()
    assert fed[0][:, 0].tolist() == [PAD]                                    # greedy's first step
    assert fed[-1].tolist() == [[PAD, 4, 5], [PAD, 6, EOS]]                  # start + outputs[:-1] (EOS appended)


def test_scoring_appends_the_configured_eos():
    model = marian_model()
    hyp = score_targets(model, [[5, 6, EOS]], [[4, 5]])[0]
    assert hyp.ids == [4, 5, EOS] and hyp.finished and hyp.output_ids == [4, 5]
    with pytest.raises(ValueError, match=f"not PAD/BOS \\({PAD}/{PAD}\\)"):
        score_targets(model, [[5, EOS]], [[4, PAD]])


def test_sources_are_padded_with_the_configured_pad():
    model = marian_model()
    batch, lengths = as_batch([[5, 6, EOS], [7, EOS]], model)
    assert batch.tolist() == [[5, 6, EOS], [7, EOS, PAD]] and lengths.tolist() == [3, 2]
    assert model.src_mask(batch)[:, 0, 0].tolist() == [[True, True, True], [True, True, False]]
    with pytest.raises(ValueError, match=f"not PAD/BOS/EOS \\({PAD}/{PAD}/{EOS}\\)"):
        check_prefix([4, EOS], model)
    assert check_prefix([3, 2], model) == [3, 2]                             # this project's EOS/BOS: content here


def test_constrain_bans_the_given_ids():
    ids = SpecialIds(pad=9, unk=1, start=9, eos=0)
    row = constrain(torch.zeros(1, 10), length=0, min_len=1, special=ids)
    assert torch.isinf(row[0, [0, 9]]).all() and torch.isfinite(row[0, 1:9]).all()
    assert special_ids(torch.nn.Linear(2, 2)) == DEFAULT_IDS                 # no ModelConfig: the constants


class _Pieces:
    def encode(self, text, side):
        return [int(t) for t in text.split()]


def test_text_encoding_uses_the_given_ids():
    marian = SpecialIds(pad=PAD, unk=1, start=PAD, eos=EOS)
    assert encoding.source_ids(_Pieces(), "5 6 7", 3, marian) == [5, 6, EOS]
    assert encoding.output_ids(_Pieces(), "5 6", 8, marian) == [5, 6, EOS]
    assert encoding.target_ids(_Pieces(), "5 6", 8, marian) == [PAD, 5, 6, EOS]
    assert encoding.decoder_inputs([5, 6, EOS], marian) == [PAD, 5, 6]
    assert encoding.target_ids(_Pieces(), "5 6", 8) == [BOS_ID, 5, 6, EOS_ID]   # defaults: the constants


def test_training_pairs_use_the_models_ids():
    from types import SimpleNamespace

    from explorer.config import TrainConfig
    from explorer.data.encoded import encode_pairs
    from explorer.training.inputs import BatchPlan

    marian = SpecialIds(pad=PAD, unk=1, start=PAD, eos=EOS)
    pairs = [SimpleNamespace(src="5 6 7", tgt="8 9"), SimpleNamespace(src="5", tgt="8")]
    split = encode_pairs(_Pieces(), pairs, 16, marian)
    assert split.src == [[5, 6, 7, EOS], [5, EOS]] and split.tgt == [[PAD, 8, 9, EOS], [PAD, 8, EOS]]
    src, tgt_in, tgt_out = BatchPlan(split, TrainConfig()).tensors([0, 1], "cpu")
    assert src.tolist() == [[5, 6, 7, EOS], [5, EOS, PAD, PAD]]
    assert tgt_in.tolist() == [[PAD, 8, 9], [PAD, 8, EOS]] and tgt_out.tolist() == [[8, 9, EOS], [8, EOS, PAD]]
