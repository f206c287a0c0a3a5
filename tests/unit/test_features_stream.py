"""Residual-stream sites on the shipped numbers model: their rows are the layer's output (a hook written
here), their SAE has no skip and reconstructs its input, a clamp to a feature's own value changes nothing
to the bit, a splice by a perfect reconstruction leaves the logits as they were, a saved SAE reads back here
and in SAELens (its plain "topk" SAE) with the same encodings and is refused for an FFN site, and the
command trains and evaluates them with --sites."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.sentences import build_sentences
from explorer.studies.features import __main__ as command
from explorer.studies.features import files, metrics, sites, splice, steering
from explorer.studies.features import transcoder as tcm
from explorer.studies.features.job import FeatureSettings
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")
SITE = "encoder.layers.1.resid"
QUICK = tcm.TrainSettings(width=256, k=8, steps=200, batch=512, skip=False)
SMALL = ["--sae-width", "64", "--sae-k", "4", "--steps", "40", "--batch", "256", "--rows", "3000", "--held-rows", "500"]


@pytest.fixture(scope="module")
def numbers():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(NUMBERS)
    corpus = load_corpus("numbers")
    train = sites.collect(ckpt.model, ckpt.tokenizer, corpus.train[:1500], SITE, 15_000)
    held = sites.collect(ckpt.model, ckpt.tokenizer, corpus.dev[:300], SITE, 4_000)
    return ckpt, train, held, tcm.train(train.inputs, train.outputs, QUICK)


def _layer_outputs(model, layer: str, src, tgt_in) -> torch.Tensor:
    """The output of `layer` (a module path) in one teacher-forced pass, by a hook on the layer itself."""
    seen = {}
    handle = dict(model.named_modules())[layer].register_forward_hook(lambda _m, _a, out: seen.update(out=out))
    try:
        with torch.no_grad():
            model.logits(src, tgt_in)
    finally:
        handle.remove()
    return seen["out"]


def _pair(ckpt, text="three hundred and twenty one"):
    from explorer.studies.common.sentences import greedy_ids
    eos, start = ckpt.model.cfg.special.eos, ckpt.model.cfg.special.start
    src = ckpt.tokenizer.encode(text, side="src") + [eos]
    out = greedy_ids(ckpt.model, [src])[0] + [eos]
    return torch.tensor([src]), torch.tensor([[start] + out[:-1]])


def test_the_sites_and_the_rows_of_a_stream_site_are_the_layers_output(numbers):
    ckpt, _, _, _ = numbers
    model = ckpt.model
    assert sites.sites(model) == ["encoder.layers.0.ffn", "encoder.layers.1.ffn", "decoder.layers.0.ffn",
                                  "decoder.layers.1.ffn"]                      # the graphs' "every FFN", unchanged
    assert sites.stream_sites(model) == ["encoder.layers.0.resid", "encoder.layers.1.resid", "decoder.layers.0.resid",
                                         "decoder.layers.1.resid"]
    assert sites.all_sites(model) == sites.sites(model) + sites.stream_sites(model)
    src, tgt_in = _pair(ckpt)
    for site, layer in (("encoder.layers.1.resid", "encoder.layers.1"), ("decoder.layers.0.resid", "decoder.layers.0")):
        expected = _layer_outputs(model, layer, src, tgt_in)[0]                                     # [L, d]
        got = sites.every_row(model, src.tolist(), tgt_in.tolist(), site)
        assert got.outputs is got.inputs and np.array_equal(got.inputs, expected.numpy())
        assert torch.equal(sites.site_inputs(model, site, src, tgt_in)[0], expected)
    with pytest.raises(ValueError, match="not a site"):
        sites.module(model, "encoder.layers.7.resid")
    with pytest.raises(ValueError, match="not an FFN site"):
        sites.ffn(model, SITE)


def test_the_sae_keeps_no_skip_and_reconstructs_its_input(numbers):
    _, train, held, sae = numbers
    assert not sae.W_skip.any()
    got = metrics.quality(sae, held.inputs, held.inputs)
    base = metrics.quality(tcm.train(train.inputs, train.outputs, tcm.TrainSettings(
        width=256, k=8, steps=200, batch=512, skip=False, random_decoder=True)), held.inputs, held.inputs)
    assert got.fve > 0.9 and got.fve > base.fve + 0.1, (got, base)        # 0.96 against 0.46 here
    x = torch.from_numpy(held.inputs[:200])
    with torch.no_grad():
        assert torch.allclose(sae(x), sae.decode(sae.encode(x)), atol=1e-5)
    # a skip would be trained from 0 if it were asked for: the flag is what keeps it out
    with_skip = tcm.train(train.inputs[:2000], train.outputs[:2000],
                          tcm.TrainSettings(width=64, k=4, steps=5, batch=64))
    assert with_skip.W_skip.any()


def test_a_clamp_to_a_features_own_value_at_a_stream_site_changes_nothing(numbers):
    ckpt, _, _, sae = numbers
    model = ckpt.model
    src, tgt_in = _pair(ckpt)
    with torch.no_grad():
        z = sae.encode(sites.site_inputs(model, SITE, src, tgt_in)[0])                           # [L, m]
    position, feature = divmod(int(z.argmax()), z.shape[1])
    plain = steering.forced_logprobs(model, src[0].tolist(), tgt_in[0, 1:].tolist() + [model.cfg.special.eos])
    mask = steering.positions_mask(src.shape[1], [position])
    out_ids = tgt_in[0, 1:].tolist() + [model.cfg.special.eos]
    with steering.clamped(model, SITE, sae, feature, float(z[position, feature]), mask):
        assert torch.equal(steering.forced_logprobs(model, src[0].tolist(), out_ids), plain)
    with steering.clamped(model, SITE, sae, feature, 0.0, mask):
        assert not torch.equal(steering.forced_logprobs(model, src[0].tolist(), out_ids), plain)


def test_a_splice_by_a_perfect_reconstruction_leaves_the_logits_and_the_mean_writes_the_mean(numbers):
    ckpt, _, _, _ = numbers
    model, d = ckpt.model, ckpt.model.cfg.d_model
    # an SAE that reconstructs exactly: latents relu(x) and relu(-x), written back as x
    perfect = tcm.TopKTranscoder(d, 2 * d, d, d)
    eye = torch.eye(d)
    with torch.no_grad():
        perfect.W_enc.copy_(torch.cat([eye, -eye], 1))
        perfect.W_dec.copy_(torch.cat([eye, -eye], 0))
    src, tgt_in = _pair(ckpt)
    with torch.no_grad():
        plain = model.logits(src, tgt_in)
        with splice.spliced(model, {s: splice.by_transcoder(perfect) for s in sites.stream_sites(model)}):
            assert torch.equal(model.logits(src, tgt_in), plain)
    sents = build_sentences(model, ckpt.tokenizer, load_corpus("numbers").dev, 12)
    means = splice.mean_outputs(model, sents, [SITE])
    seen = {}
    with splice.spliced(model, {SITE: splice.by_mean(means[SITE])}):
        handle = sites.module(model, SITE).register_forward_hook(lambda _m, _a, out: seen.update(out=out))
        try:
            ablated = splice.target_ce(model, sents)
        finally:
            handle.remove()
    assert torch.allclose(seen["out"], means[SITE].expand_as(seen["out"])) and ablated > splice.target_ce(model, sents)


def test_a_saved_sae_reads_back_here_and_in_saelens_and_is_refused_for_an_ffn_site(numbers, tmp_path):
    ckpt, _, held, sae = numbers
    sha, d = ckpt.meta["weights_sha256"], ckpt.model.cfg.d_model
    folder = files.save(sae, tmp_path / "sae", site=SITE, weights_sha256=sha, model_name="numbers-en-de")
    cfg = json.loads((folder / files.CFG).read_text())
    assert cfg["architecture"] == "topk" and "d_out" not in cfg
    assert cfg["metadata"]["hook_name"] == "encoder.layers.1.resid_post"
    back = files.load(folder, site=SITE, weights_sha256=sha, d_model=d)
    x = torch.from_numpy(held.inputs[:200])
    assert torch.equal(back.encode(x), sae.encode(x)) and not back.W_skip.any()

    from sae_lens import SAE
    theirs = SAE.load_from_disk(str(folder), device="cpu")                  # SAELens's own TopK SAE, as it is
    with torch.no_grad():
        assert torch.allclose(theirs.encode(x), sae.encode(x), atol=1e-5)
        assert torch.allclose(theirs(x), sae(x), atol=1e-5)
    with pytest.raises(files.DictionaryUnusable, match="residual-stream SAE, not a dictionary for") as err:
        files.load(folder, site="encoder.layers.1.ffn", weights_sha256=sha, d_model=d)
    assert "\n" not in str(err.value)
    skipping = tcm.TopKTranscoder(d, 16, d, 4)
    with torch.no_grad():
        skipping.W_skip.fill_(1.0)
    with pytest.raises(ValueError, match="has no skip"):
        files.save(skipping, tmp_path / "bad", site=SITE, weights_sha256=sha, model_name="numbers-en-de")


def test_the_command_trains_and_evaluates_stream_sites(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    out = tmp_path / "train.json"
    assert command.main(["train", str(NUMBERS), "--sites", "resid", *SMALL, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    ckpt = load_checkpoint(NUMBERS)
    assert [row["site"] for row in result["layers"]] == sites.stream_sites(ckpt.model)
    assert result["settings"]["sites"] == "resid"
    for row in result["layers"]:
        assert row["width"] == 64 and row["k"] == 4 and "fve_linear" not in row and row["fve"] > row["fve_random"]
    out = tmp_path / "evaluate.json"
    assert command.main(["evaluate", str(NUMBERS), "--sites", "resid", "--first", "20", "--held-rows", "200",
                         "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [row["site"] for row in result["layers"]] == sites.stream_sites(ckpt.model)
    assert result["ce"]["model"] < result["ce"]["spliced"] < result["ce"]["mean_ablated"]
    capsys.readouterr()
    for argv, said in ((["evaluate", str(NUMBERS), "--sites", "all", "--out", str(out)], "--sites all"),
                       (["train", str(NUMBERS), "--sites", "heads", "--out", str(out)], "--sites"),
                       (["train", str(NUMBERS), "--sae-width", "16", "--sae-k", "32", "--out", str(out)],
                        "must not exceed")):
        assert command.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, (argv, err)


def test_the_sizes_of_each_kind_come_from_one_place():
    settings = FeatureSettings()
    stream = settings.train_settings("encoder.layers.0.resid", 128)
    ffn = settings.train_settings("encoder.layers.0.ffn", 128)
    assert (stream.width, stream.k, stream.skip) == (256, 8, False)
    assert (ffn.width, ffn.k) == (settings.width, settings.k)
    for mode in ("auto", "always", "never"):                                  # an SAE never has a skip
        assert not FeatureSettings(skip=mode).train_settings("encoder.layers.0.resid", 128).skip, mode
    with pytest.raises(ValueError, match="no skip"):
        settings.train_settings("encoder.layers.0.resid", 128, skip=True)
