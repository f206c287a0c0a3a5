"""Importing a Hugging Face Marian model (python -m explorer.convert from-hf): the imported model
computes what MarianMTModel computes (logits on a padded batch, greedy ids, beam-5 n-best), every
capture point works on it, and bad sources fail with a clear message, offline within seconds.

Length penalty mapping used here (and in the README): our "average" (cumulative log-prob / output
length, EOS counted) with canonical stopping = HF length_penalty=1.0, early_stopping="never"; our
"none" = HF length_penalty=0.0, early_stopping="never"; max_len_a=0, max_len_b=N = HF max_new_tokens=N.
Our decoders never write the pad/start id: HF gets bad_words_ids=[[pad]].
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import beam_search, greedy_search
from explorer.inspection.hooks import capture, capture_points
from explorer.interop import hf_source
from explorer.interop.hf_export import export_marian
from explorer.interop.hf_import import import_marian
from explorer.store.card import MODEL_CARD
from explorer.store.checkpoint import load_checkpoint
from explorer.text.encoding import source_ids
from support.marian_helpers import TEST_SOURCES, random_marian
from support.numerics import model_atol, score_atol
from support.waiting import run_watched

transformers = pytest.importorskip("transformers")
MAX_NEW = 12


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """(HF model, its directory, our imported checkpoint, loaded float32)."""
    root = tmp_path_factory.mktemp("marian")
    hf = random_marian(root / "hf")
    out = import_marian(str(root / "hf"), root / "ours", dtype=torch.float32)
    return hf, root / "hf", out


def batch(ck):
    ids = [source_ids(ck.tokenizer, s, 64, ck.config.special) for s in TEST_SOURCES]
    width = max(map(len, ids))
    pad = ck.config.pad_id
    return torch.tensor([row + [pad] * (width - len(row)) for row in ids])            # [B, S]


def test_config_and_card_say_what_was_imported(marian):
    _, hf_dir, out = marian
    ck = load_checkpoint(out)
    cfg = ck.config
    assert (cfg.activation, cfg.pe_layout, cfg.scale_embeddings, cfg.final_logits_bias) == ("swish", "halves", True, True)
    assert (cfg.eos_id, cfg.unk_id, cfg.pad_id, cfg.decoder_start_id) == (0, 1, cfg.src_vocab_size - 1, cfg.src_vocab_size - 1)
    card = json.loads((out / "card.json").read_text())[MODEL_CARD]
    assert card["source"] == str(hf_dir.resolve()) and card["languages"] == ["es", "en"]
    assert card["parameters"] == ck.model.num_parameters()
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"


def test_logits_match_hugging_face_on_a_padded_batch(marian):
    hf, _, out = marian
    ck = load_checkpoint(out)
    src = batch(ck)                                                                    # [B, S]
    pad, start = ck.config.pad_id, ck.config.decoder_start_id
    tgt_in = torch.randint(2, pad, (src.shape[0], 7))                                  # [B, T]
    tgt_in[:, 0] = start
    with torch.no_grad():
        ours = ck.model.logits(src, tgt_in)                                            # [B, T, V]
        theirs = hf(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=tgt_in).logits
    assert (src == pad).any(), "the batch must be padded"
    # Hugging Face's implementation against ours: other kernels and orders, so within model_atol
    torch.testing.assert_close(ours, theirs, rtol=0, atol=model_atol(ck.model, theirs, vocab=False))


def test_greedy_ids_equal_hugging_face_generate(marian):
    hf, _, out = marian
    ck = load_checkpoint(out)
    pad = ck.config.pad_id
    lengths = set()
    for row in batch(ck):
        src = row[row != pad][None]                                                    # [1, S]
        ours = greedy_search(ck.model, src, DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_NEW))[0]
        theirs = hf.generate(input_ids=src, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW,
                             bad_words_ids=[[pad]], forced_eos_token_id=None)[0].tolist()
        assert [ck.config.decoder_start_id] + ours.best.ids == theirs
        lengths.add(len(theirs))
    assert len(lengths) > 1, "outputs of one length would not test where decoding stops"


@pytest.mark.parametrize("ours_penalty, hf_penalty", [("average", 1.0), ("none", 0.0)])
def test_beam_n_best_equals_hugging_face_generate(marian, ours_penalty, hf_penalty):
    hf, _, out = marian
    ck = load_checkpoint(out)
    pad = ck.config.pad_id
    finished = 0
    for row in batch(ck):
        src = row[row != pad][None]                                                    # [1, S]
        cfg = DecodeConfig(beam_size=5, n_best=5, length_penalty=ours_penalty, max_len_a=0, max_len_b=MAX_NEW)
        ours = beam_search(ck.model, src, cfg)[0].hypotheses
        got = hf.generate(input_ids=src, num_beams=5, num_return_sequences=5, do_sample=False,
                          max_new_tokens=MAX_NEW, length_penalty=hf_penalty, early_stopping="never",
                          bad_words_ids=[[pad]], forced_eos_token_id=None, return_dict_in_generate=True,
                          output_scores=True)
        theirs = [[t for t in seq.tolist()[1:] if t != pad] for seq in got.sequences]
        assert [h.ids for h in ours] == theirs
        for h, score in zip(ours, got.sequences_scores.tolist()):
            assert h.normalized == pytest.approx(score, abs=score_atol(ck.model, h.token_logprobs))
        finished += sum(h.finished for h in ours)
    assert 0 < finished < 5 * len(TEST_SOURCES), "both finished and cut-off hypotheses must be compared"


def test_capture_sees_every_point_and_changes_nothing(marian):
    _, _, out = marian
    ck = load_checkpoint(out)
    src = batch(ck)
    tgt_in = torch.full((src.shape[0], 4), ck.config.decoder_start_id)
    with torch.no_grad():
        plain = ck.model(src, tgt_in)
        with capture(ck.model) as trace:
            watched = ck.model(src, tgt_in)
    assert set(trace.arrays) == set(capture_points(ck.model))
    # the hooked path: same formulas, other kernels
    torch.testing.assert_close(watched, plain, rtol=0, atol=model_atol(ck.model, plain))


def test_weights_from_a_pytorch_bin_import_alike(marian, tmp_path):
    hf, hf_dir, out = marian
    source = tmp_path / "bin"
    source.mkdir()
    for f in hf_dir.iterdir():
        if f.name != "model.safetensors":
            (source / f.name).write_bytes(f.read_bytes())
    torch.save(hf.state_dict(), source / "pytorch_model.bin")
    again = import_marian(str(source), tmp_path / "from-bin", dtype=torch.float32)
    a, b = load_checkpoint(out).model.state_dict(), load_checkpoint(again).model.state_dict()
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_a_pickle_that_runs_code_is_refused(marian, tmp_path):
    _, hf_dir, _ = marian
    source = tmp_path / "evil"
    source.mkdir()
    for f in hf_dir.iterdir():
        if f.name != "model.safetensors":
            (source / f.name).write_bytes(f.read_bytes())
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"x": Evil()}, source / "pytorch_model.bin")
    with pytest.raises(ValueError, match="without unpickling"):
        import_marian(str(source), tmp_path / "out")
    assert not marker.exists() and not (tmp_path / "out").exists()


def _copy(hf_dir: Path, source: Path) -> Path:
    """A copy of the Marian folder to damage."""
    source.mkdir()
    for f in hf_dir.iterdir():
        (source / f.name).write_bytes(f.read_bytes())
    return source


@pytest.mark.parametrize("edit, message", [
    ({"normalize_before": True}, "normalize_before"),
    ({"activation_function": "gelu_new"}, "activation_function"),
    ({"decoder_attention_heads": 2}, "decoder_attention_heads"),
    ({"model_type": "bart"}, "not 'marian'"),
    ({"d_model": 48}, "shape"),
    ({"d_model": 1 << 40}, "d_model"),
    ({"pad_token_id": 3}, "pad/eos"),
])
def test_a_config_that_does_not_fit_is_refused_with_its_reason(marian, tmp_path, edit, message):
    _, hf_dir, _ = marian
    source = _copy(hf_dir, tmp_path / "edited")
    config = json.loads((hf_dir / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(ValueError, match=message):
        import_marian(str(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_generation_config_that_starts_elsewhere_is_refused(marian, tmp_path):
    """Marian starts from <pad>: a generation_config.json that says otherwise made transformers' generate start
    from another token than the import (it was never read)."""
    _, hf_dir, _ = marian
    source = _copy(hf_dir, tmp_path / "edited")
    generation = json.loads((source / "generation_config.json").read_text())
    pad = json.loads((source / "config.json").read_text())["pad_token_id"]
    assert generation["decoder_start_token_id"] == pad                  # as save_pretrained writes it: imports
    (source / "generation_config.json").write_text(json.dumps({**generation, "decoder_start_token_id": 0}))
    with pytest.raises(ValueError, match=rf"generation_config.json: decoder_start_token_id is 0, config.json's is {pad}"):
        import_marian(str(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bias", [
    "zeros of another vocabulary",       # needs no bias, but is not this model's
    "16M non-zero values",               # was dropped in silence from 1 << 24 values on
])
def test_a_final_logits_bias_of_the_wrong_shape_is_refused(marian, tmp_path, bias):
    from safetensors.torch import load_file, save_file
    _, hf_dir, _ = marian
    source = _copy(hf_dir, tmp_path / "edited")
    tensors = load_file(str(source / "model.safetensors"))
    vocab = tensors["final_logits_bias"].shape[-1]
    if bias.startswith("zeros"):
        tensors["final_logits_bias"] = torch.zeros(1, vocab + 1)
    else:
        tensors["final_logits_bias"] = torch.full((1, 1 << 24), -50.0)
        tensors["final_logits_bias"][0, 5] = 50.0
    save_file(tensors, str(source / "model.safetensors"))
    with pytest.raises(ValueError, match=rf"final_logits_bias has shape \(1, \d+\), the config needs \(1, {vocab}\)"):
        import_marian(str(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("code, shown", [
    ("e" * 523_900, r"'e{32}' \(523,900 characters\)"),     # made a config.json its own loader refused (over 1 MiB)
    ("es\nen", r"'es\\nen'"),
    ("\x1b[31mes", r"'\\x1b\[31mes'"),
    ("", "''"),
])
def test_a_language_code_that_is_no_short_label_is_refused_unless_the_pair_is_given(marian, tmp_path, code, shown):
    _, hf_dir, _ = marian
    source = _copy(hf_dir, tmp_path / "edited")
    (source / "tokenizer_config.json").write_text(json.dumps({"source_lang": code, "target_lang": "en"}))
    with pytest.raises(ValueError, match=rf"tokenizer_config.json: source_lang {shown}.*is not a language code"):
        import_marian(str(source), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    out = import_marian(str(source), tmp_path / "named", src_lang="es", tgt_lang="en")
    meta = json.loads((out / "config.json").read_text())
    assert (meta["src_lang"], meta["tgt_lang"]) == ("es", "en")


def test_export_of_an_imported_model_gives_back_the_same_tensors(marian, tmp_path):
    hf, _, out = marian
    again = export_marian(out, tmp_path / "hf-again")
    reloaded = transformers.MarianMTModel.from_pretrained(again).eval()
    theirs = hf.state_dict()
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, theirs[name]), name


def test_a_hub_id_fails_fast_and_clearly_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))              # an empty cache
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_source, "HUB_HOST", "hub.invalid")               # unresolvable, as offline
    # fast: the only network step is the reach probe, bounded by REACH_TIMEOUT_S in its code; no download
    # (the hub client's retries and long timeouts) is tried once the probe fails. Asserted by what is
    # called, not by a stopwatch, which a busy machine would fail.
    huggingface_hub = pytest.importorskip("huggingface_hub")
    real, tried = huggingface_hub.snapshot_download, []

    def snapshot_download(*args, local_files_only=False, **kwargs):
        tried.append(local_files_only)
        if not local_files_only:
            raise AssertionError("a download was tried after the hub was found unreachable")
        return real(*args, local_files_only=True, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    with pytest.raises(hf_source.SourceError, match="cannot reach hub.invalid.*pass its path"):
        hf_source.locate("Helsinki-NLP/opus-mt-es-en")
    assert tried == [True]                                                  # the cache was asked, nothing more


def test_the_command_line_says_what_to_do_offline(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    run = run_watched([sys.executable, "-m", "explorer.convert", "from-hf", "Helsinki-NLP/opus-mt-es-en",
                       str(tmp_path / "out")], "the offline import", env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    # "local cache" is the HF_HUB_OFFLINE branch's message: it ends before any network step (no clock needed)
    assert "local cache" in run.stderr and "pass its path" in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source, message", [("no/such/dir/at/all", "no such directory"),
                                             ("README.md", "is a file")])
def test_a_source_that_is_not_a_model_directory_is_named(source, message):
    with pytest.raises(hf_source.SourceError, match=message):
        hf_source.locate(source)


def test_the_alignment_scorecard_runs_on_an_imported_model_with_a_users_gold_file(marian, tmp_path):
    """Any checkpoint with a gold file in the project's format: here an imported Marian model (its own
    vocabulary, separate sentencepiece models) scored by `python -m explorer align --gold`."""
    from explorer.studies.align.__main__ import main as align_main
    lines = []
    for text in TEST_SOURCES[:3]:
        words = text.split()[:6]
        links = " ".join(f"{i}-{len(words) - 1 - i}" for i in range(len(words)))
        lines.append(f"{' '.join(words)} ||| {' '.join(reversed(words))} ||| {links}")
    gold = tmp_path / "mine.align"
    gold.write_text("# a user's gold set\n" + "\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "scorecard.json"
    _, _, ckpt_dir = marian
    assert align_main([str(ckpt_dir), "--gold", str(gold),
                       "--attribution-pairs", "1", "--ig-steps", "4", "--no-eflomal", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["gold"]["pairs"] == 3 and result["gold"]["name"] == "mine.align"
    rows = {r["aligner"]: r for r in result["rows"]}
    assert {"cross-attention (naive): best head", "integrated-gradients"} <= set(rows)
    assert len(result["grid"]["attention"]["naive"]) == load_checkpoint(ckpt_dir).config.n_decoder_layers
