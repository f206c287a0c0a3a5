"""The encoder-state map (explorer.studies.grounding.states) and the verdict on both signals: a sentence's
states are its own in any batch, a training sentence whose pieces are all kept lies at distance 0 and
finds itself nearest, the two signals are standardised on the held-out sentences, and a kept map is
refused when it belongs to other weights or data, or is damaged."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save as save_tensors

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.grounding import index as ix
from explorer.studies.grounding import states
from explorer.studies.grounding.verdict import STATES_QUANTILE, calibrate_states, combine, verdict
from support.app_support import ROOT
from explorer.text.encoding import source_ids
from support.numerics import model_atol

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")


@pytest.fixture(scope="module")
def numbers():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(NUMBERS)
    train = [p.src for p in load_corpus("numbers").train[:400]]
    return ckpt, train, states.build(ckpt.model, ckpt.tokenizer, train, "numbers", "ab" * 32)


def test_a_sentences_states_do_not_depend_on_its_batch(numbers):
    ckpt, train, _ = numbers
    together = states.source_states(ckpt.model, ckpt.tokenizer, train[:40])
    for k in (0, 17, 39):
        alone = states.source_states(ckpt.model, ckpt.tokenizer, [train[k]])[0]
        assert alone.shape == together[k].shape and alone.shape[0] == len(ckpt.tokenizer.encode(train[k]))
        assert np.abs(alone - together[k]).max() <= model_atol(ckpt.model, together[k])


def test_kept_training_pieces_lie_at_distance_zero_and_find_themselves(numbers):
    ckpt, train, smap = numbers
    every = sum(len(s) for s in states.source_states(ckpt.model, ckpt.tokenizer, train))
    assert len(smap.states) == min(states.SAMPLE, every) == every          # 400 sentences: every piece kept
    assert np.allclose(np.linalg.norm(smap.states.astype(np.float32), axis=1), 1.0, atol=2e-3)
    for k in (3, 250):
        own = states.source_states(ckpt.model, ckpt.tokenizer, [train[k]])[0]
        assert states.distance(smap, own) < 2e-3                          # float16 rounding of the kept states
        pair, position, cosine = states.nearest(smap, own[1], k=1)[0]
        assert cosine == pytest.approx(1.0, abs=2e-3)
        if (pair, position) != (k, 1):       # a tie: another kept piece whose state is this one (read again)
            found = states.source_states(ckpt.model, ckpt.tokenizer, [train[pair]])[0][position]
            assert np.dot(found, own[1]) / (np.linalg.norm(found) * np.linalg.norm(own[1])) > 1 - 2e-3
    unlike = states.source_states(ckpt.model, ckpt.tokenizer, ["Mi hermana trabaja en un hospital."])[0]
    assert states.distance(smap, unlike) > 0.05


def test_the_verdict_weighs_both_signals_standardised_on_held_out_sentences(numbers):
    ckpt, _, smap = numbers
    index = ix.load(ix.index_path("numbers"))
    held = [p.src for p in load_corpus("numbers").dev[:60]]
    distances = [states.distance(smap, s) for s in states.source_states(ckpt.model, ckpt.tokenizer, held)]
    cal = calibrate_states(index, held, distances, "development pairs")
    combined = np.array([combine(cal, verdict(index, s, "m").score, d) for s, d in zip(held, distances)])
    assert abs(combined.mean()) < 1e-6 and cal["score_std"] > 0 and cal["distance_std"] > 0
    assert cal["rule"].startswith("highest") and not (combined > cal["threshold"]).any()   # numbers: a closed domain
    found = verdict(index, held[0], "m", distance=distances[0], calibration=cal)
    assert found.combined == pytest.approx(combined[0], abs=1e-5) and found.guessing is False
    far = verdict(index, held[0], "m", distance=max(distances) + 10 * cal["distance_std"], calibration=cal)
    assert far.guessing is True and "unlike its training sentences" in far.summary
    assert 0 < STATES_QUANTILE < 1


def test_a_kept_map_reads_back_and_is_refused_for_other_weights_data_width_or_damage(numbers, tmp_path):
    ckpt, _, smap = numbers
    d, pairs = ckpt.model.cfg.d_model, 400
    path = states.save(smap, tmp_path / "m.safetensors")
    back = states.load(path, "numbers", "ab" * 32, d, pairs)
    for name in ("mean", "basis", "states", "pair", "position"):
        assert np.array_equal(getattr(back, name), getattr(smap, name)), name
    some = states.source_states(ckpt.model, ckpt.tokenizer, ["three hundred and five"])[0]
    assert states.distance(back, some) == states.distance(smap, some)
    for args, said in (((path, "numbers", "cd" * 32, d, pairs), "weights_sha256"),
                       ((path, "bible", "ab" * 32, d, pairs), "dataset"),
                       ((path, "numbers", "ab" * 32, d * 2, pairs), "width"),
                       ((path, "numbers", "ab" * 32, d, 10), "outside"),
                       ((tmp_path / "none", "numbers", "ab" * 32, d, pairs), "no state map")):
        with pytest.raises(states.MapUnusable, match=said):
            states.load(*args)
    raw = path.read_bytes()
    (tmp_path / "cut").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(states.MapUnusable, match="damaged"):
        states.load(tmp_path / "cut", "numbers", "ab" * 32, d, pairs)
    bad = smap.states.copy()
    bad[0, 0] = np.inf
    meta = {"format": "1", "dataset": "numbers", "weights_sha256": "ab" * 32, "calibration": json.dumps({})}
    (tmp_path / "inf").write_bytes(save_tensors({"mean": smap.mean, "basis": smap.basis, "states": bad,
                                                 "pair": smap.pair, "position": smap.position}, metadata=meta))
    with pytest.raises(states.MapUnusable, match="NaN"):
        states.load(tmp_path / "inf", "numbers", "ab" * 32, d, pairs)
    (tmp_path / "kept").mkdir()                          # a map linked from outside its folder is not read
    (tmp_path / "kept" / "m.safetensors").symlink_to(path)
    with pytest.raises(states.MapUnusable, match="symbolic link leading out of"):
        states.load(tmp_path / "kept" / "m.safetensors", "numbers", "ab" * 32, d, pairs)
    good = {"score_mean": 1.0, "score_std": 0.5, "distance_mean": 2.0, "distance_std": 0.3, "threshold": 4.0}
    for calibration in ({"threshold": 5}, {**good, "score_std": 0}, {**good, "distance_mean": "2"},
                        {**good, "threshold": float("nan")}, {**good, "score_mean": 10 ** 400},
                        "[" * 100_000 + "]" * 100_000):
        text = calibration if isinstance(calibration, str) else json.dumps(calibration)
        (tmp_path / "cal").write_bytes(save_tensors(
            {"mean": smap.mean, "basis": smap.basis, "states": smap.states, "pair": smap.pair,
             "position": smap.position}, metadata={**meta, "calibration": text}))
        with pytest.raises(states.MapUnusable):                        # not a KeyError or a division by 0 later
            states.load(tmp_path / "cal", "numbers", "ab" * 32, d, pairs)
    for calibration in ({}, good):                                     # not calibrated yet, or calibrated
        (tmp_path / "cal").write_bytes(save_tensors(
            {"mean": smap.mean, "basis": smap.basis, "states": smap.states, "pair": smap.pair,
             "position": smap.position}, metadata={**meta, "calibration": json.dumps(calibration)}))
        assert states.load(tmp_path / "cal", "numbers", "ab" * 32, d, pairs).calibration == calibration


def test_an_outputs_states_are_the_decoder_states_its_words_are_read_from(numbers):
    """Each kept output state, put through the output projection, gives the model's own teacher-forced
    log-probabilities for that piece; EOS has none; a sentence's states are its own in any batch."""
    ckpt, train, _ = numbers
    model, tok = ckpt.model, ckpt.tokenizer
    targets = [p.tgt for p in load_corpus("numbers").train[:12]]
    outs = states.training_outputs(model, tok, targets)
    together = states.output_states(model, tok, train[:12], outs)
    for k in (0, 5, 11):
        alone = states.output_states(model, tok, [train[k]], [outs[k]])[0]
        assert alone.shape == (len(outs[k]) - 1, model.cfg.d_model)                     # EOS left out
        assert np.abs(alone - together[k]).max() <= model_atol(model, together[k])
        src = torch.tensor([source_ids(tok, train[k], model.cfg.max_len, model.cfg.special)])
        tgt_in = torch.tensor([[model.cfg.special.start] + outs[k][:-1]])
        with torch.inference_mode():
            want = model(src, tgt_in)[0, :-1]                                             # [T - 1, V]
            got = model.generator(torch.from_numpy(alone))                                # [T - 1, V]
        assert torch.allclose(got, want, atol=model_atol(model, want))


def test_an_output_map_finds_its_own_pieces_and_is_kept_apart_from_the_source_map(numbers, tmp_path):
    ckpt, train, source_map = numbers
    model, tok = ckpt.model, ckpt.tokenizer
    targets = [p.tgt for p in load_corpus("numbers").train[:400]]
    outs = states.training_outputs(model, tok, targets)
    smap = states.build(model, tok, train, "numbers", "ab" * 32, train_outputs=outs)
    assert smap.side == "output" and len(smap.states) == sum(len(o) - 1 for o in outs)  # every piece kept
    own = states.output_states(model, tok, [train[7]], [outs[7]])[0]
    assert states.distance(smap, own) < 2e-3
    pair, position, _ = states.nearest(smap, own[2], k=1)[0]
    assert tok.id_to_piece(outs[pair][position], "tgt") == tok.id_to_piece(outs[7][2], "tgt")
    d = model.cfg.d_model
    path = states.save(smap, tmp_path / "out.safetensors")
    assert states.load(path, "numbers", "ab" * 32, d, 400, "output").side == "output"
    with pytest.raises(states.MapUnusable, match="side"):
        states.load(path, "numbers", "ab" * 32, d, 400)
    with pytest.raises(states.MapUnusable, match="side"):
        states.load(states.save(source_map, tmp_path / "src.safetensors"), "numbers", "ab" * 32, d, 400, "output")
    assert states.runs_map_path("numbers", "ab" * 32, "output") != states.runs_map_path("numbers", "ab" * 32)
