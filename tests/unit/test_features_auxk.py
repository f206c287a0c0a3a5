"""AuxK, the dead latents' auxiliary loss of TopK dictionaries (explorer.studies.features.transcoder; Gao et
al. 2024, A.2): its loss equals a plain per-row computation written here; in training, latents that never
fire get no gradient without it and do with it; it adds nothing while no latent is dead; the same seed gives
the same weights with it on; the settings carry each kind's (transcoders, stream SAEs) to its sites. Small synthetic rows, no checkpoint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.studies.features import transcoder as tcm
from explorer.studies.features.job import FeatureSettings


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _rows(n=3000, d=16, seed=0) -> np.ndarray:
    """Rows on 3 directions of a d-wide space, plus a little noise: a dictionary of 24 latents with k 2
    leaves some never chosen (7 here), fewer than AuxK's k_aux (d // 2 = 8), so every dead one is picked."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((3, d))
    return (rng.standard_normal((n, 3)) @ basis + 0.01 * rng.standard_normal((n, d))).astype(np.float32)


def _settings(**more) -> tcm.TrainSettings:
    return tcm.TrainSettings(**{"width": 24, "k": 2, "steps": 60, "batch": 128, "skip": False, **more})


def test_the_aux_loss_equals_a_plain_per_row_computation():
    gen = torch.Generator().manual_seed(3)
    d, m, n = 6, 20, 7
    tc = tcm.TopKTranscoder(d, m, d, k=2)
    with torch.no_grad():
        for p in (tc.W_enc, tc.b_enc, tc.W_dec, tc.b_dec):
            p.copy_(torch.randn(p.shape, generator=gen))
    x, target = torch.randn(n, d, generator=gen), torch.randn(n, d, generator=gen)
    tc.requires_grad_(False)
    out, pre, fired = tc.forward_with_pre(x)
    for n_dead in (0, 1, 2, 11):                              # k_aux = d // 2 = 3: fewer dead, and more
        dead = torch.zeros(m, dtype=torch.bool)
        dead[torch.randperm(m, generator=gen)[:n_dead]] = True
        got = float(tcm.aux_k_loss(tc, pre, out, target, dead))
        k_aux, total = d // 2, 0.0
        for i in range(n):
            candidates = sorted((float(pre[i, j]), j) for j in range(m) if dead[j])[::-1][:k_aux]
            guess = sum((value * tc.W_dec[j] for value, j in candidates), torch.zeros(d))
            total += float(((guess - (target[i] - out[i])) ** 2).sum())
        want = min(n_dead / k_aux, 1.0) * total / n
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), (n_dead, got, want)
    # what fired is what the output was made of
    assert torch.equal(fired, tc.encode(x) > 0)


def test_latents_that_never_fire_get_a_gradient_only_with_auxk():
    x = _rows()
    start = tcm.train(x, x, _settings(steps=0))               # the initial weights (W_enc is not centred)
    plain = tcm.train(x, x, _settings())
    aux = tcm.train(x, x, _settings(aux_loss_coefficient=1 / 32, dead_feature_window=5))
    untouched = (plain.W_enc == start.W_enc).all(0)           # [m]: columns no step changed
    assert 3 <= int(untouched.sum()) <= 8, int(untouched.sum())
    # without AuxK a never-chosen latent keeps its encoder column to the bit and its decoder row (renormalised)
    assert torch.allclose(plain.W_dec[untouched], start.W_dec[untouched], atol=1e-6)
    # with it, the same latents' encoder columns and decoder rows moved
    moved_enc = (aux.W_enc[:, untouched] != start.W_enc[:, untouched]).any(0)
    moved_dec = ((aux.W_dec[untouched] - start.W_dec[untouched]).abs() > 1e-4).any(1)
    assert bool(moved_enc.all()) and bool(moved_dec.all()), (moved_enc, moved_dec)


def test_auxk_adds_nothing_while_no_latent_is_dead_and_is_deterministic():
    x = _rows()
    plain = tcm.train(x, x, _settings())
    never_dead = tcm.train(x, x, _settings(aux_loss_coefficient=1.0, dead_feature_window=10_000))
    for name, p in plain.state_dict().items():
        assert torch.equal(p, never_dead.state_dict()[name]), name
    on = _settings(aux_loss_coefficient=1 / 32, dead_feature_window=5)
    first, second = tcm.train(x, x, on), tcm.train(x, x, on)
    for name, p in first.state_dict().items():
        assert torch.equal(p, second.state_dict()[name]), name
    assert not torch.equal(first.W_enc, plain.W_enc)          # and it did train differently
    # the random baseline's frozen decoder stays frozen with AuxK on
    rnd = tcm.train(x, x, _settings(random_decoder=True, aux_loss_coefficient=1 / 32, dead_feature_window=5))
    rnd_start = tcm.train(x, x, _settings(steps=0, random_decoder=True))
    assert torch.equal(rnd.W_dec, rnd_start.W_dec)


def test_the_settings_carry_each_kinds_auxk_to_its_sites():
    settings = FeatureSettings(aux_loss_coefficient=0.25, dead_feature_window=7, sae_aux_loss_coefficient=0.5,
                               sae_dead_feature_window=9)
    for site, want in (("encoder.layers.0.ffn", (0.25, 7)), ("decoder.layers.1.ffn", (0.25, 7)),
                       ("encoder.layers.0.resid", (0.5, 9)), ("decoder.layers.1.resid", (0.5, 9))):
        for random_decoder in (False, True):
            made = settings.train_settings(site, 128, random_decoder=random_decoder)
            assert (made.aux_loss_coefficient, made.dead_feature_window) == want, site
    for name in ("aux_loss_coefficient", "sae_aux_loss_coefficient"):
        with pytest.raises(ValueError, match=name):
            FeatureSettings(**{name: -1.0})
    for name in ("dead_feature_window", "sae_dead_feature_window"):
        with pytest.raises(ValueError, match=name):
            FeatureSettings(**{name: 0})


def test_by_default_auxk_is_on_for_the_stream_saes_only():
    """The measured defaults (job.py, docs/FEATURES.md): transcoders without AuxK, stream SAEs at weight 1, a
    25-step window."""
    default = FeatureSettings()
    ffn = default.train_settings("encoder.layers.0.ffn", 128)
    resid = default.train_settings("encoder.layers.0.resid", 128)
    assert ffn.aux_loss_coefficient == 0.0
    assert (resid.aux_loss_coefficient, resid.dead_feature_window) == (1.0, 25)


def test_the_command_takes_auxk_and_refuses_a_negative_weight_in_one_line(tmp_path, capsys):
    from explorer.studies.features import __main__ as command

    args = command.build_parser("train").parse_args(["some/checkpoint", "--aux-loss-coefficient", "0.03125",
                                                     "--dead-feature-window", "50", "--out", str(tmp_path / "f.json")])
    assert (args.aux_loss_coefficient, args.dead_feature_window) == (0.03125, 50)
    assert (args.sae_aux_loss_coefficient, args.sae_dead_feature_window) == (1.0, 25)      # the defaults
    args = command.build_parser("train").parse_args(["some/checkpoint", "--sae-aux-loss-coefficient", "0",
                                                     "--sae-dead-feature-window", "40", "--out", str(tmp_path / "f.json")])
    assert (args.sae_aux_loss_coefficient, args.sae_dead_feature_window) == (0.0, 40)
    assert args.aux_loss_coefficient == 0.0
    rc = command.main(["train", "no/such/checkpoint", "--aux-loss-coefficient", "-1", "--out", str(tmp_path / "f.json")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "aux_loss_coefficient" in err, err
