"""Transcoders on the shipped numbers model's FFNs: the rows collected are what the FFN computes, TopK
keeps k latents, the sparse forward equals decode(encode(x)) + skip(x), training beats the random-decoder baseline on held-out rows and is repeatable with one
seed, and a transcoder saved in SAELens's format reads back here and in SAELens with the same latents,
while a folder made for other weights, another site or damaged is refused in one line."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import pytest
import torch

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.features import files, metrics, sites
from explorer.studies.features import transcoder as tcm
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")
SITE = "encoder.layers.1.ffn"
QUICK = tcm.TrainSettings(width=256, k=8, steps=300, batch=512)


@pytest.fixture(scope="module")
def numbers():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(NUMBERS)
    corpus = load_corpus("numbers")
    train = sites.collect(ckpt.model, ckpt.tokenizer, corpus.train[:1500], SITE, 20_000)
    held = sites.collect(ckpt.model, ckpt.tokenizer, corpus.dev[:300], SITE, 5_000)
    return ckpt, train, held, tcm.train(train.inputs, train.outputs, QUICK)


def test_the_rows_are_what_the_ffn_computes_from_what_it_reads(numbers):
    ckpt, train, _, _ = numbers
    assert sites.sites(ckpt.model) == ["encoder.layers.0.ffn", "encoder.layers.1.ffn", "decoder.layers.0.ffn",
                                       "decoder.layers.1.ffn"]
    with torch.no_grad():
        again = sites.ffn(ckpt.model, SITE)(torch.from_numpy(train.inputs[:500])).numpy()
    assert np.abs(again - train.outputs[:500]).max() < 1e-4 * max(1.0, np.abs(again).max())
    with pytest.raises(ValueError, match="not an FFN site"):
        sites.ffn(ckpt.model, "encoder.layers.1.self_attn")


def test_topk_keeps_k_latents_and_zeroes_negatives():
    pre = torch.tensor([[3.0, -1.0, 2.0, 0.5], [-3.0, -2.0, -1.0, -0.5]])
    assert tcm.topk_relu(pre, 2).tolist() == [[3.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


def test_training_beats_the_random_decoder_baseline_and_repeats_with_its_seed(numbers):
    _, train, held, tc = numbers
    got = metrics.quality(tc, held.inputs, held.outputs)
    random = tcm.train(train.inputs, train.outputs, replace(QUICK, random_decoder=True))
    baseline = metrics.quality(random, held.inputs, held.outputs)
    # the skip's linear map explains most of this small model's FFNs, for the baseline too (0.94): the
    # trained latents leave less than half of what the random ones leave unexplained (0.016 against 0.059)
    assert got.fve > 0.9 and 1 - got.fve < 0.5 * (1 - baseline.fve), (got, baseline)
    assert got.max_density < 0.5, got                      # no latent fires on most tokens (0.27 here)
    assert got.l0 <= QUICK.k and got.rows == len(held.inputs)
    again = tcm.train(train.inputs, train.outputs, QUICK)
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), tc.parameters()))


def test_the_quality_figures_counted_in_chunks_are_a_plain_count_over_every_row(numbers, monkeypatch):
    """FVE, L0, dead and busiest shares against numpy over the whole held-out set at once, with chunks of
    1,000 rows so that the sums cross chunk edges (the last chunk a part one); the busiest share that the
    training looks at part way is the same count."""
    _, _, held, tc = numbers
    monkeypatch.setattr(metrics, "CHUNK", 1000)
    assert len(held.inputs) > 1000 and len(held.inputs) % 1000
    got = metrics.quality(tc, held.inputs, held.outputs)
    with torch.no_grad():
        x = torch.from_numpy(held.inputs)
        z = tc.encode(x).numpy().astype(np.float64)                                   # [N, m]
        guess = (tc.decode(torch.from_numpy(z).float()) + tc.skip(x)).numpy().astype(np.float64)
    y = held.outputs.astype(np.float64)
    active = (z > 0).sum(0)                                                            # [m]
    assert got.fve == pytest.approx(1 - ((guess - y) ** 2).sum() / ((y - y.mean(0)) ** 2).sum(), abs=1e-5)
    assert got.l0 == pytest.approx((z > 0).sum(1).mean())
    assert got.dead_fraction == pytest.approx((active == 0).mean())
    assert got.max_density == pytest.approx(active.max() / len(z)) == metrics.busiest_share(tc.encode, held.inputs)
    assert 0 < got.max_density < 1 and got.rows == len(z)
    assert metrics.busiest_share(tc.encode, held.inputs[:0]) == 0.0


def test_the_plain_form_beats_its_random_baseline_by_far_more(numbers):
    """Without the skip (what --skip auto keeps where no latent is dense) the random baseline has no linear map
    to lean on: here 0.975 against 0.285, the busiest latent on 22% of tokens."""
    _, train, held, _ = numbers
    plain = replace(QUICK, skip=False)
    got = metrics.quality(tcm.train(train.inputs, train.outputs, plain), held.inputs, held.outputs)
    baseline = metrics.quality(tcm.train(train.inputs, train.outputs, replace(plain, random_decoder=True)),
                               held.inputs, held.outputs)
    assert got.fve > 0.9 and got.fve - baseline.fve > 0.3 and got.max_density < 0.5, (got, baseline)


def test_a_saved_transcoder_reads_back_here_and_in_saelens_with_the_same_latents(numbers, tmp_path):
    ckpt, _, held, tc = numbers
    sha, d = ckpt.meta["weights_sha256"], ckpt.model.cfg.d_model
    folder = files.save(tc, tmp_path / "tc", site=SITE, weights_sha256=sha, model_name="numbers-en-de")
    back = files.load(folder, site=SITE, weights_sha256=sha, d_model=d)
    x = torch.from_numpy(held.inputs[:200])
    assert torch.equal(back.encode(x), tc.encode(x))

    from sae_lens import SAE, SkipTranscoder, SkipTranscoderConfig, register_sae_class   # SAELens has no TopK
    from sae_lens.saes.sae import SAEMetadata                                           # transcoder: one
    from sae_lens.saes.topk_sae import TopK                                             # registered here
    from sae_lens.util import filter_valid_dataclass_fields

    @dataclass
    class TopKSkipTranscoderConfig(SkipTranscoderConfig):
        k: int = 32

        @classmethod
        def architecture(cls) -> str:
            return files.ARCHITECTURE

        @classmethod
        def from_dict(cls, d):
            cfg = cls(**filter_valid_dataclass_fields(d, cls))
            cfg.metadata = SAEMetadata(**d.get("metadata", {}))
            return cfg

    class TopKSkipTranscoder(SkipTranscoder):
        def get_activation_fn(self):
            return TopK(self.cfg.k)

        @classmethod
        def from_dict(cls, d):
            return cls(TopKSkipTranscoderConfig.from_dict(d))

    register_sae_class(files.ARCHITECTURE, TopKSkipTranscoder, TopKSkipTranscoderConfig)
    theirs = SAE.load_from_disk(str(folder), device="cpu")
    with torch.no_grad():
        assert torch.allclose(theirs.encode(x), tc.encode(x), atol=1e-5)
        assert torch.allclose(theirs(x), tc(x), atol=1e-5)


def test_a_folder_for_other_weights_another_site_or_damaged_is_refused(numbers, tmp_path):
    ckpt, _, _, tc = numbers
    sha, d = ckpt.meta["weights_sha256"], ckpt.model.cfg.d_model
    folder = files.save(tc, tmp_path / "tc", site=SITE, weights_sha256=sha, model_name="numbers-en-de")
    for kwargs, said in (({"site": SITE, "weights_sha256": "ab" * 32, "d_model": d}, "weights_sha256"),
                         ({"site": "decoder.layers.0.ffn", "weights_sha256": sha, "d_model": d}, "site"),
                         ({"site": SITE, "weights_sha256": sha, "d_model": d * 2}, "do not fit")):
        with pytest.raises(files.DictionaryUnusable, match=said):
            files.load(folder, **kwargs)
    raw = (folder / files.WEIGHTS).read_bytes()
    (folder / files.WEIGHTS).write_bytes(raw[:len(raw) // 2])
    with pytest.raises(files.DictionaryUnusable, match="damaged"):
        files.load(folder, site=SITE, weights_sha256=sha, d_model=d)
    (folder / files.CFG).write_text(json.dumps({"architecture": "topk"}))
    with pytest.raises(files.DictionaryUnusable, match="not a TopK transcoder"):
        files.load(folder, site=SITE, weights_sha256=sha, d_model=d)
    (folder / files.CFG).write_text("[" * 100_000 + "]" * 100_000)             # a RecursionError in json.loads
    with pytest.raises(files.DictionaryUnusable, match="nested too deeply"):
        files.load(folder, site=SITE, weights_sha256=sha, d_model=d)


def test_the_sparse_forward_equals_decode_of_encode_plus_the_skip(numbers):
    _, _, held, tc = numbers
    x = torch.from_numpy(held.inputs[:300])
    with torch.no_grad():
        assert torch.allclose(tc(x), tc.decode(tc.encode(x)) + tc.skip(x), atol=1e-5)
