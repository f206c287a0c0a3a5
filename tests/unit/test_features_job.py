"""`python -m explorer features train|evaluate` on the shipped numbers model, small settings: a dictionary
and its baseline for every FFN, kept in SAELens's format and scored; one seed, one JSON; the CE of the
spliced model checked against a plain per-sentence cross-entropy, a splice of each FFN by itself changing
nothing and the mean ablation writing the mean; bad input refused in one line before any work."""
from __future__ import annotations

import json
from dataclasses import replace
import threading

import pytest
import torch
import torch.nn.functional as F

from explorer.data import load_corpus
from explorer.files.names import FEATURES, FEATURES_KINDS
from explorer.runtime.progress import Cancelled
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.common.sentences import build_sentences
from explorer.studies.features import __main__ as command
from explorer.studies.features import contexts, sites, splice
from explorer.studies.features.job import TRAIN, FeatureSettings, dictionary_folder
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")
SMALL = ["--width", "64", "--k", "4", "--steps", "40", "--batch", "256", "--rows", "3000", "--held-rows", "500"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The train command run once into a runs folder of its own; (runs folder, its JSON)."""
    torch.set_num_threads(1)
    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_RUNS_DIR", str(runs))
        out = runs / "train.json"
        assert command.main(["train", str(NUMBERS), *SMALL, "--out", str(out)]) == 0
    return runs, json.loads(out.read_text())


def test_train_keeps_a_dictionary_and_a_baseline_for_every_ffn_and_repeats_with_its_seed(trained, tmp_path,
                                                                                         monkeypatch):
    runs, result = trained
    ckpt = load_checkpoint(NUMBERS)
    sha = ckpt.meta["weights_sha256"]
    assert [row["site"] for row in result["layers"]] == sites.sites(ckpt.model)
    assert result["settings"]["weights_sha256"] == sha and result["settings"]["width"] == 64
    for row in result["layers"]:
        assert row["l0"] <= 4 and 0 <= row["dead_fraction"] <= 1 and row["rows"] == 3000
        assert -1 < row["fve_random"] < 1 and -1 < row["fve_linear"] < 1 and row["fve"] < 1
        for kind in FEATURES_KINDS:
            folder = dictionary_folder(sha, row["site"], kind, runs / FEATURES)
            assert (folder / "cfg.json").is_file() and (folder / "sae_weights.safetensors").is_file()
        kept = dictionary_folder(sha, row["site"], "trained", runs / FEATURES)
        assert (kept / "contexts.safetensors").is_file()                 # the Features page's contexts, and its figures
        assert json.loads((kept.parent / "site.json").read_text())["layer"] == row
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    assert command.main(["train", str(NUMBERS), *SMALL, "--out", str(tmp_path / "again.json")]) == 0
    assert json.loads((tmp_path / "again.json").read_text()) == result


def test_evaluate_reports_ce_recovered_and_bleu_beside_the_baseline(trained, tmp_path, monkeypatch, capsys):
    runs, _ = trained
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(runs))
    out = tmp_path / "evaluate.json"
    assert command.main(["evaluate", str(NUMBERS), "--first", "30", "--held-rows", "300", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    ce = result["ce"]
    assert ce["model"] < ce["mean_ablated"]                           # the FFNs matter to this model
    assert result["ce_recovered"] == pytest.approx(
        (ce["mean_ablated"] - ce["spliced"]) / (ce["mean_ablated"] - ce["model"]), abs=1e-4)
    assert result["settings"]["sentences"] == 30 and result["settings"]["forced"] == "reference"
    assert set(result["bleu"]) == {"model", "spliced"} and len(result["layers"]) == 4
    assert "CE recovered" in capsys.readouterr().out
    # sources only: the decoder reads the model's own output, which BLEU then compares with
    (tmp_path / "sources.txt").write_text("three hundred and twenty one\nfive\nninety nine\n")
    assert command.main(["evaluate", str(NUMBERS), "--sentences", str(tmp_path / "sources.txt"), "--held-rows",
                         "100", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["forced"] == "output" and result["bleu"]["model"] == pytest.approx(100.0)


def test_bad_input_is_refused_in_one_line_before_any_work(trained, tmp_path, monkeypatch, capsys):
    out = tmp_path / "x.json"
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "empty"))
    cases = [(["evaluate", str(NUMBERS), "--out", str(out)], "features train"),        # nothing trained here
             (["explain", str(NUMBERS)], "train|evaluate"),
             (["train", str(NUMBERS), "--k", "0"], "k"),
             (["train", str(NUMBERS), "--width", "16", "--k", "32", "--out", str(out)], "must not exceed"),
             (["evaluate", str(NUMBERS), "--sentences", str(tmp_path / "missing.txt"), "--out", str(out)],
              "--sentences")]
    for argv, said in cases:
        capsys.readouterr()
        assert command.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1 and "Traceback" not in err, (argv, err)
    assert not out.exists()
    # a stream's width is its model's (2 x d_model): its step's bound is checked before the first site trains,
    # not when the stream's turn comes (here the bound is lowered so that the FFNs' width 16 fits and 256 not)
    from explorer.studies.features import transcoder
    monkeypatch.setattr(transcoder, "STEP_BYTES", 100_000)
    capsys.readouterr()
    assert command.main(["train", str(NUMBERS), "--sites", "all", "--width", "16", "--k", "4", "--batch", "16",
                         "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "per training step" in err and "width 256" in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not (tmp_path / "empty" / "features").exists()        # nothing trained


@pytest.fixture(scope="module")
def numbers_set():
    ckpt = load_checkpoint(NUMBERS)
    return ckpt, build_sentences(ckpt.model, ckpt.tokenizer, load_corpus("numbers").dev, 24)


def test_the_ce_equals_a_plain_per_sentence_cross_entropy(numbers_set):
    ckpt, sents = numbers_set
    total, tokens = 0.0, 0
    with torch.no_grad():
        for src, out in zip(sents.src, sents.out):
            tgt_in = torch.tensor([[ckpt.model.cfg.special.start] + out[:-1]])
            logits = ckpt.model.logits(torch.tensor([src]), tgt_in)[0]                     # [T, V]
            total += float(F.cross_entropy(logits, torch.tensor(out), reduction="sum"))
            tokens += len(out)
    assert splice.target_ce(ckpt.model, sents, batch_size=7) == pytest.approx(total / tokens, rel=1e-4)


def test_the_mean_ablation_is_a_plain_per_sentence_mean_over_real_positions(numbers_set):
    """The mean counted the end token read at a shorter sentence's padded slot (one position more per
    sentence shorter than its batch's longest: 193 positions for 172 at the decoder here, the first decoder
    FFN's mean off by up to 1.2): each site's mean is the plain mean of its output, one sentence at a time."""
    ckpt, sents = numbers_set
    model, names = ckpt.model, sites.sites(ckpt.model)
    assert len({len(out) for out in sents.out}) > 1                    # lengths differ: a batch pads
    means = splice.mean_outputs(model, sents, names, batch_size=7)
    seen = {}
    handles = [sites.hook(model, site, lambda _reads, out, site=site: seen.__setitem__(site, out.detach()))
               for site in names]
    sums = {site: torch.zeros(model.cfg.d_model, dtype=torch.float64) for site in names}
    counts = dict.fromkeys(names, 0)
    try:
        with torch.no_grad():
            for src, out in zip(sents.src, sents.out):
                model.logits(torch.tensor([src]), torch.tensor([[model.cfg.special.start] + out[:-1]]))
                for site in names:
                    sums[site] += seen[site][0].double().sum(0)                               # [d]
                    counts[site] += seen[site].shape[1]
    finally:
        for handle in handles:
            handle.remove()
    assert counts[names[-1]] == sum(len(out) for out in sents.out)
    for site in names:
        assert torch.allclose(means[site], (sums[site] / counts[site]).float(), atol=1e-4), site


def test_a_splice_of_each_ffn_by_itself_changes_nothing_and_the_mean_writes_the_mean(numbers_set):
    ckpt, sents = numbers_set
    model, names = ckpt.model, sites.sites(ckpt.model)
    clean = splice.target_ce(model, sents)
    with splice.spliced(model, {site: sites.ffn(model, site).forward for site in names}):
        assert splice.target_ce(model, sents) == pytest.approx(clean, rel=1e-5)
    means = splice.mean_outputs(model, sents, names)
    seen = {}
    with splice.spliced(model, {site: splice.by_mean(means[site]) for site in names}):
        handle = sites.ffn(model, names[-1]).register_forward_hook(lambda _m, _a, out: seen.update(out=out))
        try:                                                     # hooks run in order: this one sees the splice's
            ablated = splice.target_ce(model, sents)
        finally:
            handle.remove()
    assert torch.allclose(seen["out"], means[names[-1]].expand_as(seen["out"]))
    assert ablated > clean
    assert not any(sites.ffn(model, s)._forward_hooks for s in names)                   # the splices are gone
    assert splice.recovered(2.0, 1.0, 0.0) == 0.5 and splice.recovered(2.0, 0.0, 0.0) == 1.0


def test_the_rows_of_a_sentence_set_are_what_the_ffn_computes(numbers_set):
    ckpt, sents = numbers_set
    for site in ("encoder.layers.0.ffn", "decoder.layers.1.ffn"):
        rows = sites.collect_sentences(ckpt.model, sents, site, 100)
        with torch.no_grad():
            again = sites.ffn(ckpt.model, site)(torch.from_numpy(rows.inputs)).numpy()
        assert len(rows.inputs) == 100 and abs(again - rows.outputs).max() < 1e-4 * max(1.0, abs(again).max())


def test_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="must not exceed"):
        FeatureSettings(width=16, k=32)
    with pytest.raises(ValueError, match="rows"):
        FeatureSettings(rows=10)
    # each in its range, together 4 GiB in one tensor (32 GiB a step): a training step is bounded in bytes
    with pytest.raises(ValueError, match="per training step"):
        FeatureSettings(width=16_384, batch=65_536)
    with pytest.raises(ValueError, match="per training step"):
        FeatureSettings(sae_width=16_384, batch=65_536)
    with pytest.raises(ValueError, match="per training step"):               # a stream's width from its model
        FeatureSettings(batch=65_536).train_settings("encoder.layers.0.resid", d_model=8_192)
    FeatureSettings(width=1_024, batch=65_536)                                 # 2 GiB: the bound itself


def test_a_cancelled_training_writes_no_result_file(tmp_path):
    ckpt = load_checkpoint(NUMBERS)
    corpus = load_corpus("numbers")
    stop = threading.Event()
    stop.set()
    out = tmp_path / "train.json"
    settings = FeatureSettings(width=32, k=4, steps=20, batch=64, rows=1000, held_rows=200)
    with pytest.raises(Cancelled):
        TRAIN.to_file(out, ckpt.model, ckpt.tokenizer, corpus.train[:300], corpus.dev[:50], settings,
                      root=tmp_path / "features", context=RunContext(meta=ckpt.meta, cancel=stop))
    assert not out.exists() and not (tmp_path / "features").exists()      # stopped at its first step


def test_a_site_job_cancelled_while_its_contexts_are_built_keeps_the_last_dictionary_and_its_figures(tmp_path):
    """Cancel at the contexts stage saved the new dictionary but not its figures: the Features page showed the
    last training's figures beside it. Now nothing is written until the contexts are built; a finished job's
    figures name the dictionary they are of."""
    from explorer.studies.features import job
    from explorer.studies.features.job import SITE, site_result_path
    ckpt = load_checkpoint(NUMBERS)
    corpus = load_corpus("numbers")
    site, root, sha = "encoder.layers.0.ffn", tmp_path / "features", ckpt.meta["weights_sha256"]
    out = site_result_path(sha, site, root)
    args = (ckpt.model, ckpt.tokenizer, corpus.train[:300], corpus.dev[:50])
    first = FeatureSettings(width=32, k=4, steps=20, batch=64, rows=1000, held_rows=200)
    SITE.to_file(out, *args, first, site=site, root=root, context=RunContext(meta=ckpt.meta))
    trained = dictionary_folder(sha, site, "trained", root)
    kept = {path.name: path.read_bytes() for path in trained.iterdir()}
    figures = out.read_bytes()
    assert json.loads(figures)["layer"]["dictionary_sha256"] == contexts.weights_hash(trained)

    stop = threading.Event()
    real_build = job.contexts.build

    def build_then_cancel(*a, **k):
        index = real_build(*a, **k)
        stop.set()                                   # the user presses Cancel while the contexts are built
        return index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(job.contexts, "build", build_then_cancel)
        with pytest.raises(Cancelled):
            SITE.to_file(out, *args, replace(first, width=64, seed=1), site=site, root=root,
                         context=RunContext(meta=ckpt.meta, cancel=stop))
    assert {path.name: path.read_bytes() for path in trained.iterdir()} == kept and out.read_bytes() == figures
