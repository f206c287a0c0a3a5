"""Which transcoder an FFN site gets (FeatureSettings.skip): "always" the skip transcoder, "never" the plain
one, "auto" the plain one unless one of its latents fires on more than site_training.DENSE_SHARE of the
held-out rows, then the skip transcoder in its place, and the random baseline in the form kept. Checked on the shipped
numbers model with small settings: each mode's forms and its flag on the command; auto's outcomes forced
by the threshold (0: every plain transcoder is dense, seen at the probe a third of the way or, the probe
moved past the end, at its end; 1: none is), each equal, bit for bit, to the dictionaries "always" and
"never" train with the seed; the progress counted over every training the site may need, up to the job's
total."""
from __future__ import annotations

import pytest
import torch

from explorer.data import load_corpus
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.command import settings_from
from explorer.studies.features import __main__ as command
from explorer.studies.features import job, site_training
from explorer.studies.features.job import FeatureSettings
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
SITE = "decoder.layers.0.ffn"
STEPS = 30


def test_each_mode_tries_its_forms_and_a_stream_never_has_a_skip():
    ffn, resid = "encoder.layers.1.ffn", "encoder.layers.1.resid"
    assert FeatureSettings().skip == "auto"
    for mode, forms in (("auto", (False, True)), ("always", (True,)), ("never", (False,))):
        settings = FeatureSettings(skip=mode)
        assert settings.forms(ffn) == forms and settings.trainings(ffn) == len(forms) + 1, mode
        assert settings.train_settings(ffn, 128).skip == forms[0]            # the first form tried
        assert settings.forms(resid) == (False,) and settings.trainings(resid) == 2
    with pytest.raises(ValueError, match="auto, always, never"):
        FeatureSettings(skip="sometimes")


def test_the_command_takes_skip_and_refuses_another_word_in_one_line(tmp_path, capsys):
    out = str(tmp_path / "f.json")
    parser = command.build_parser("train")
    assert settings_from(parser.parse_args(["ckpt", "--out", out]), FeatureSettings).skip == "auto"
    for mode in ("always", "never", "auto"):
        assert settings_from(parser.parse_args(["ckpt", "--skip", mode, "--out", out]), FeatureSettings).skip == mode
    assert command.main(["train", "ckpt", "--skip", "yes", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert "--skip" in err and len(err.splitlines()) == 1, err


@pytest.fixture(scope="module")
def numbers():
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs numbers-en-de")
    torch.set_num_threads(1)
    ckpt = load_checkpoint(NUMBERS)
    corpus = load_corpus("numbers")
    return ckpt, corpus.train[:400], corpus.dev[:80]


def _site(numbers, skip: str, monkeypatch=None, dense_share: float | None = None, steps: int = STEPS):
    """(row, {kind: dictionary}, the step counts on_step saw) of SITE trained with `skip`."""
    ckpt, train, dev = numbers
    if dense_share is not None:
        monkeypatch.setattr(site_training, "DENSE_SHARE", dense_share)
    settings = FeatureSettings(width=32, k=4, steps=steps, batch=128, rows=1000, held_rows=200, skip=skip)
    seen = []
    row, made, _ = site_training.train_site(ckpt.model, ckpt.tokenizer, train, dev, SITE, settings, on_step=seen.append)
    return row, made, seen


def _same(a, b) -> bool:
    return all(torch.equal(getattr(a, name), getattr(b, name)) for name in ("W_enc", "b_enc", "W_dec", "W_skip", "b_dec"))


def test_auto_keeps_the_plain_transcoder_when_none_of_its_latents_is_dense(numbers, monkeypatch):
    row, made, seen = _site(numbers, "auto", monkeypatch, dense_share=1.0)
    assert row["skip"] is False and "max_density_without_skip" not in row
    assert not made["trained"].W_skip.any() and not made["random"].W_skip.any()       # the baseline is plain too
    plain, plain_made, plain_seen = _site(numbers, "never")
    assert row == plain and all(_same(made[kind], plain_made[kind]) for kind in made)
    # the site may need three trainings; the baseline's steps are the last third, so progress jumps to it
    assert seen == [*range(1, STEPS + 1), *range(2 * STEPS + 1, 3 * STEPS + 1)]
    assert plain_seen == [*range(1, 2 * STEPS + 1)]


def test_auto_trains_the_skip_transcoder_when_the_plain_one_is_dense_part_way(numbers, monkeypatch):
    """Dense at the probe (a third of its steps): the plain training ends there, the skip one takes its place."""
    row, made, seen = _site(numbers, "auto", monkeypatch, dense_share=0.0)
    probe = site_training.probe_step(STEPS)
    assert 1 <= probe < STEPS and row["skip"] is True and row["without_skip_steps"] == probe
    early, _, _ = _site(numbers, "never", steps=probe)          # the plain form as it stood at the probe
    assert abs(row["max_density_without_skip"] - early["max_density"]) <= 2 / early["held_rows"]
    assert made["trained"].W_skip.any() and made["random"].W_skip.any()               # both with the skip
    always, always_made, _ = _site(numbers, "always")
    assert {k: v for k, v in row.items() if k not in ("max_density_without_skip", "without_skip_steps")} == always
    assert all(_same(made[kind], always_made[kind]) for kind in made)
    assert seen == [*range(1, probe + 1), *range(STEPS + 1, 3 * STEPS + 1)]


def test_auto_trains_the_skip_transcoder_when_the_plain_one_ends_dense(numbers, monkeypatch):
    """Not dense at the probe (none here: it lies past the last step) but at its end: the whole plain training,
    then the skip one."""
    monkeypatch.setattr(site_training, "probe_step", lambda steps: steps + 1)
    row, made, seen = _site(numbers, "auto", monkeypatch, dense_share=0.0)
    plain, _, _ = _site(numbers, "never")
    assert row["skip"] is True and row["without_skip_steps"] == STEPS
    assert row["max_density_without_skip"] == plain["max_density"] > 0
    always, always_made, _ = _site(numbers, "always")
    assert all(_same(made[kind], always_made[kind]) for kind in made)
    assert seen == [*range(1, 3 * STEPS + 1)]


def test_the_jobs_progress_counts_what_the_site_trains_and_ends_at_its_total(numbers, monkeypatch, tmp_path):
    """run_site's progress bar: its total is every training the site may need (job.FeatureSettings.trainings),
    and whichever form auto keeps, the count rises, never passes the total, and reaches it."""
    from explorer.studies.common.context import RunContext

    ckpt, train, dev = numbers
    settings = FeatureSettings(width=32, k=4, steps=STEPS, batch=128, rows=1000, held_rows=200)
    for share in (0.0, 1.0):                                      # refused at the probe; kept
        monkeypatch.setattr(site_training, "DENSE_SHARE", share)
        seen = []
        job.run_site(ckpt.model, ckpt.tokenizer, train, dev, settings, site=SITE, root=tmp_path / str(share),
                     context=RunContext(meta=ckpt.meta, progress=lambda kind, done, total: seen.append(
                         (kind, done, total)) or True))
        counts = [(done, total) for kind, done, total in seen if kind == "dictionaries"]
        assert {total for _, total in counts} == {3 * STEPS}, share
        assert [done for done, _ in counts] == sorted(done for done, _ in counts) and counts[-1][0] == 3 * STEPS
