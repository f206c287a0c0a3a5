"""Importing Hugging Face M2M100 / NLLB-200 models (python -m explorer convert from-hf): the imported model
computes what M2M100ForConditionalGeneration computes (logits on a padded batch within 1e-4, greedy ids and
beam-5 n-best equal to generate with the same forced target-language token), its tokenizer gives
transformers' ids, the forced language token is a forced step of the BeamTrace, and bad input is refused in
one line each. Two shapes: an M2M100 (2+2 layers, d=32) and an NLLB (3+3 layers, d=48, 6 heads, three
target languages).

Length penalty mapping as in test_marian_import: our "average" with canonical stopping = HF
length_penalty=1.0, early_stopping="never"; "none" = 0.0. The target-language token is given, not chosen:
it scores 0, as HF's forced_bos_token_id makes it score.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import beam_search, greedy_search
from explorer.decoding.translate import translate
from explorer.interop.hf_import import import_from_hf, import_m2m100
from explorer.store.checkpoint import load_checkpoint
from explorer.store.errors import CheckpointError
from explorer.text.encoding import source_ids
from support.m2m100_helpers import TEST_SOURCES, random_m2m100, reference_tokenizer
from support.numerics import score_atol

transformers = pytest.importorskip("transformers")
MAX_NEW = 12
SHAPES = {
    "m2m100": dict(kind="m2m100", d_model=32, heads=4, ffn=64, layers=2, seed=0),
    "nllb": dict(kind="nllb", d_model=48, heads=6, ffn=96, layers=3, seed=1),
}
PAIRS = {"m2m100": ("es", ["en"]), "nllb": ("spa_Latn", ["eng_Latn", "fra_Latn", "deu_Latn"])}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def imported(request, tmp_path_factory):
    """(kind, HF model, its directory, our checkpoint loaded in float32)."""
    kind = request.param
    root = tmp_path_factory.mktemp(kind)
    hf = random_m2m100(root / "hf", **SHAPES[kind])
    src, tgts = PAIRS[kind]
    out = import_from_hf(str(root / "hf"), root / "ours", dtype=torch.float32, src_lang=src, tgt_lang=tgts[0])
    return kind, hf, root / "hf", load_checkpoint(out)


def sources(ck) -> list[list[int]]:
    return [source_ids(ck.tokenizer, s, 64, ck.config.special) for s in TEST_SOURCES]


def test_the_config_says_what_was_imported(imported):
    kind, _, _, ck = imported
    cfg = ck.config
    assert (cfg.norm_first, cfg.pe_layout, cfg.pe_frequencies, cfg.pe_offset) == (True, "halves", "fairseq", 2)
    assert (cfg.pad_id, cfg.eos_id, cfg.unk_id, cfg.decoder_start_id) == (1, 2, 3, 2)
    assert cfg.activation == "relu" and cfg.scale_embeddings and cfg.tie_embeddings and cfg.output_tied
    assert ck.meta["src_lang"] == PAIRS[kind][0] and ck.tokenizer.kind == kind


def test_source_and_target_ids_equal_the_transformers_tokenizer(imported):
    kind, _, hf_dir, ck = imported
    src, tgts = PAIRS[kind]
    for tgt in tgts:
        ref = reference_tokenizer(hf_dir, kind, src, tgt)
        tok = ck.tokenizer.with_languages(src, tgt)
        for text in TEST_SOURCES:
            assert source_ids(tok, text, 64, ck.config.special) == ref(text)["input_ids"]
        target = "the house is big"
        labels = ref(text_target=target)["input_ids"]
        assert tok.encode(target, "tgt") + [ck.config.eos_id] == labels
        assert tok.forced_target == labels[:1]
        assert tok.decode(labels) == target


def _logit_difference(hf, ck) -> float:
    """The largest |ours - transformers'| logit on the test sources as a padded batch, random target ids."""
    rows = sources(ck)
    width, pad = max(map(len, rows)), ck.config.pad_id
    src = torch.tensor([r + [pad] * (width - len(r)) for r in rows])                   # [B, S]
    assert (src == pad).any(), "the batch must be padded"
    tgt_in = torch.randint(4, ck.config.tgt_vocab_size, (src.shape[0], 7))             # [B, T]
    tgt_in[:, 0] = ck.config.decoder_start_id
    tgt_in[:, 1] = ck.tokenizer.forced_target[0]
    with torch.no_grad():
        ours = ck.model.logits(src, tgt_in)                                            # [B, T, V]
        theirs = hf(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=tgt_in).logits
    return (ours - theirs).abs().max().item()


def test_logits_match_hugging_face_on_a_padded_batch_within_1e_4(imported):
    _, hf, _, ck = imported
    difference = _logit_difference(hf, ck)
    assert difference < 1e-4, difference


def test_untied_embeddings_import_apart_and_tied_copies_that_differ_are_refused(tmp_path):
    """tie_word_embeddings false keeps three matrices (the encoder's and decoder's embeddings, lm_head): they
    were imported as the one shared matrix, every logit off by up to 7.3 and no greedy output alike. A tied
    file holding an encoder matrix other than model.shared was imported from model.shared in silence."""
    hf = random_m2m100(tmp_path / "untied", tied=False)
    ck = load_checkpoint(import_from_hf(str(tmp_path / "untied"), tmp_path / "ours", dtype=torch.float32,
                                        src_lang="es", tgt_lang="en"))
    assert not ck.config.tie_embeddings and not ck.config.output_tied
    assert _logit_difference(hf, ck) < 1e-4
    from safetensors.torch import load_file, save_file
    random_m2m100(tmp_path / "tied")
    tensors = load_file(str(tmp_path / "tied" / "model.safetensors"))
    tensors["model.encoder.embed_tokens.weight"] = tensors["model.shared.weight"] + 0.5
    save_file(tensors, str(tmp_path / "tied" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="hold model.shared.weight and model.encoder.embed_tokens.weight with "
                                         "different values, where the config ties them"):
        import_from_hf(str(tmp_path / "tied"), tmp_path / "out", dtype=torch.float32, src_lang="es", tgt_lang="en")
    assert not (tmp_path / "out").exists()


def _hf_generate(hf, src, forced, **kw):
    return hf.generate(input_ids=src, do_sample=False, max_new_tokens=MAX_NEW, forced_bos_token_id=forced,
                       bad_words_ids=[[1]], forced_eos_token_id=None, **kw)


def test_greedy_ids_equal_hugging_face_generate_with_the_forced_language(imported):
    kind, hf, _, ck = imported
    src_lang, tgts = PAIRS[kind]
    lengths = set()
    for tgt in tgts:
        forced = ck.tokenizer.language_id(tgt)
        for row in sources(ck):
            src = torch.tensor([row])                                                  # [1, S]
            ours = greedy_search(ck.model, src, DecodeConfig(strategy="greedy", max_len_a=0, max_len_b=MAX_NEW),
                                 given=[forced])[0].best
            theirs = _hf_generate(hf, src, forced, num_beams=1)[0].tolist()
            assert [ck.config.decoder_start_id] + ours.ids == theirs
            assert ours.ids[0] == forced and ours.token_logprobs[0] == 0.0
            lengths.add(len(theirs))
    assert len(lengths) > 1, "outputs of one length would not test where decoding stops"


@pytest.mark.parametrize("ours_penalty, hf_penalty", [("average", 1.0), ("none", 0.0)])
def test_beam_n_best_equals_hugging_face_generate_with_the_forced_language(imported, ours_penalty, hf_penalty):
    kind, hf, _, ck = imported
    _, tgts = PAIRS[kind]
    finished = total = 0
    for tgt in tgts:
        forced = ck.tokenizer.language_id(tgt)
        for row in sources(ck):
            src = torch.tensor([row])                                                  # [1, S]
            cfg = DecodeConfig(beam_size=5, n_best=5, length_penalty=ours_penalty, max_len_a=0, max_len_b=MAX_NEW)
            ours = beam_search(ck.model, src, cfg, given=[forced])[0].hypotheses
            got = _hf_generate(hf, src, forced, num_beams=5, num_return_sequences=5, length_penalty=hf_penalty,
                               early_stopping="never", return_dict_in_generate=True, output_scores=True)
            theirs = [[t for t in seq.tolist()[1:] if t != 1] for seq in got.sequences]
            assert [h.ids for h in ours] == theirs
            for h, score in zip(ours, got.sequences_scores.tolist()):
                assert h.normalized == pytest.approx(score, abs=score_atol(ck.model, h.token_logprobs))
            finished += sum(h.finished for h in ours)
            total += len(ours)
    assert finished > 0
    if ours_penalty == "average":           # (with no penalty, every hypothesis here ends before the limit)
        assert finished < total, "both finished and cut-off hypotheses must be compared"


def test_the_forced_language_is_a_forced_step_of_the_beam_trace(imported):
    kind, _, _, ck = imported
    src_lang, tgts = PAIRS[kind]
    tok = ck.tokenizer.with_languages(src_lang, tgts[-1])
    result = translate(ck.model, tok, TEST_SOURCES[0], DecodeConfig(beam_size=3, n_best=3), trace=True)
    forced = tok.language_id(tgts[-1])
    trace = result.beam_trace
    assert trace.prefix == (forced,)
    first = trace.candidates[trace.candidates["step"] == 0]
    assert list(first["token"]) == [forced] and first["status"][0] == trace_status("forced")
    assert all(h.ids[0] == forced for h in result.hypotheses)
    assert result.text == tok.decode(result.best.ids)          # the tag is not part of the text


def trace_status(name: str) -> int:
    from explorer.decoding.beam_trace import STATUSES
    return STATUSES.index(name)


# ---- refusals, one line each --------------------------------------------------------------------

def test_a_missing_or_unknown_language_is_refused_in_one_line_naming_some(imported):
    kind, _, _, ck = imported
    unbound = ck.tokenizer.with_languages(None, None)
    unbound.src_lang = unbound.tgt_lang = None
    with pytest.raises(ValueError, match=r"choose the source language \(--src-lang\), e\.g\. ") as caught:
        translate(ck.model, unbound, TEST_SOURCES[0])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"unknown language 'xx_Yyyy' .* e\.g\. (en|eng_Latn)") as caught:
        ck.tokenizer.with_languages(PAIRS[kind][0], "xx_Yyyy")
    assert "\n" not in str(caught.value)


def _edited(hf_dir, tmp_path, **config_edit):
    source = tmp_path / "edited"
    shutil.copytree(hf_dir, source)
    config = json.loads((hf_dir / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, **config_edit}))
    return source


@pytest.mark.parametrize("edit, message", [
    ({"model_type": "bart"}, "model_type is BART.*only Marian .* and M2M100 / NLLB-200"),
    ({"model_type": "nllb-moe"}, "model_type is NLLB-MoE"),
    ({"d_model": 1 << 40}, "d_model must be an integer"),
    ({"vocab_size": 10 ** 9}, "vocab_size must be an integer in"),
    ({"encoder_layers": 100, "decoder_layers": 100, "d_model": 8192, "encoder_ffn_dim": 32768,
      "decoder_ffn_dim": 32768, "encoder_attention_heads": 8, "decoder_attention_heads": 8},
     "GiB of memory, more than"),
    ({"vocab_size": 4000}, "vocabulary of 4000 ids does not fit this tokenizer"),
    ({"d_model": 24}, "shape"),
])
def test_a_source_that_does_not_fit_is_refused_in_one_line(imported, tmp_path, edit, message):
    _, _, hf_dir, _ = imported
    source = _edited(hf_dir, tmp_path, **edit)
    with pytest.raises((ValueError, CheckpointError), match=message) as caught:
        import_from_hf(str(source), tmp_path / "out")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_from_another_model_is_refused(imported, tmp_path):
    kind, _, hf_dir, _ = imported
    source = tmp_path / "mixed"
    shutil.copytree(hf_dir, source)
    if kind == "m2m100":                                        # NLLB's numbering: no vocab.json
        (source / "vocab.json").unlink()
    else:                                                       # M2M100's numbering: a vocab.json
        (source / "vocab.json").write_text(json.dumps({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4}))
    with pytest.raises(ValueError, match="does not fit this tokenizer") as caught:
        import_m2m100(str(source), tmp_path / "out")
    assert "\n" not in str(caught.value)


def test_the_memory_bound_refuses_before_reading_tensors(imported, tmp_path, monkeypatch):
    _, _, hf_dir, _ = imported
    monkeypatch.setenv("EXPLORER_MAX_MODEL_BYTES", "1000")
    with pytest.raises(CheckpointError, match="EXPLORER_MAX_MODEL_BYTES sets another bound"):
        import_from_hf(str(hf_dir), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---- the commands ---------------------------------------------------------------------------------

def test_convert_and_evaluate_take_the_languages_from_the_command_line(imported, tmp_path, capsys):
    """`convert from-hf` without a pair writes a checkpoint that asks for one; `evaluate --src-lang --tgt-lang`
    decodes with it (the tag forced), and an unknown language is refused in one line, exit status 2."""
    from explorer.evaluation.command import main as evaluate
    from explorer.interop.cli import main as convert

    kind, _, hf_dir, _ = imported
    src_lang, tgts = PAIRS[kind]
    assert convert(["from-hf", str(hf_dir), str(tmp_path / "ck"), "--dtype", "float32"]) == 0
    test = tmp_path / "test.tsv"
    test.write_text("".join(f"{s}\tthe house is big\n" for s in TEST_SOURCES[:2]), encoding="utf-8")
    common = [str(tmp_path / "ck"), "--test", str(test), "--no-write", "--beam", "2"]
    capsys.readouterr()
    assert evaluate(common) == 2
    err = capsys.readouterr().err
    assert "choose the source language (--src-lang)" in err and err.count("\n") == 1
    assert evaluate(common + ["--src-lang", src_lang, "--tgt-lang", "zz"]) == 2
    err = capsys.readouterr().err
    assert "unknown language 'zz'" in err and err.count("\n") == 1
    assert evaluate(common + ["--src-lang", src_lang, "--tgt-lang", tgts[-1]]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_the_analyses_held_out_set_forces_the_target_tag(imported):
    """The studies' sentence set (heads, contributions, lens ...) decodes its own outputs with the tag forced."""
    from explorer.studies.common.sentences import build_sentences, greedy_texts
    from explorer.data.types import Pair

    kind, _, _, ck = imported
    src_lang, tgts = PAIRS[kind]
    tok = ck.tokenizer.with_languages(src_lang, tgts[-1])
    pairs = [Pair(s, "the house") for s in TEST_SOURCES[:3]]
    sents = build_sentences(ck.model, tok, pairs, 3, forced="output")
    assert all(out[0] == tok.forced_target[0] for out in sents.out)
    assert all(isinstance(t, str) for t in greedy_texts(ck.model, tok, sents))


def test_weights_from_a_pytorch_bin_import_alike_and_a_pickle_that_runs_code_is_refused(imported, tmp_path):
    """pytorch_model.bin is read with torch.load(weights_only=True): the same tensors, and never code."""
    import os

    kind, hf, hf_dir, ck = imported
    source = tmp_path / "bin"
    shutil.copytree(hf_dir, source)
    (source / "model.safetensors").unlink()
    torch.save(hf.state_dict(), source / "pytorch_model.bin")
    again = load_checkpoint(import_m2m100(str(source), tmp_path / "from-bin", dtype=torch.float32,
                                          src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0]))
    a, b = ck.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(a[n], b[n]) for n in a)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"x": Evil()}, source / "pytorch_model.bin")
    with pytest.raises(ValueError, match="without unpickling"):
        import_m2m100(str(source), tmp_path / "evil")
    assert not marker.exists() and not (tmp_path / "evil").exists()


@pytest.mark.parametrize("d_model", [16, 1024])
def test_fairseq_sinusoids_equal_m2m100s_table_to_the_bit(d_model):
    """pe_frequencies="fairseq" with pe_offset 2 is M2M100SinusoidalPositionalEmbedding's table from row 2,
    computed the same way in float32 (float64 would move position 1,000's rows by up to ~1e-4)."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as Theirs

    from explorer.model.functional import sinusoidal_table

    theirs = Theirs.get_embedding(1024 + 2, d_model, padding_idx=1)                    # [L + 2, d]
    ours = sinusoidal_table(1024, d_model, 10000.0, "halves", "fairseq", 2)            # [L, d]
    assert torch.equal(ours, theirs[2:])


@pytest.mark.parametrize("damage, message", [
    ("sparse", "model.encoder.layers.0.fc1.weight is a sparse tensor; a model's weights are dense real numbers"),
    ("complex", "model.encoder.layers.0.fc1.weight is a complex tensor"),
    ("legacy", "legacy_behaviour must be true or false, not 'true'"),
])
def test_a_weight_that_is_no_dense_real_matrix_or_a_flag_in_words_is_refused_naming_it(imported, tmp_path, damage,
                                                                                         message):
    """A sparse tensor in a .bin failed in the finiteness check with torch's own message (no file, no tensor
    named); a complex one lost its imaginary part with a warning; legacy_behaviour "true" (text, which
    transformers takes as true) was read as false: the source's tag in the other place than transformers'."""
    kind, hf, hf_dir, _ = imported
    source = tmp_path / "src"
    shutil.copytree(hf_dir, source)
    if damage == "legacy":
        config = json.loads((source / "tokenizer_config.json").read_text())
        (source / "tokenizer_config.json").write_text(json.dumps({**config, "legacy_behaviour": "true"}))
    else:
        (source / "model.safetensors").unlink()
        state = dict(hf.state_dict())
        weight = state["model.encoder.layers.0.fc1.weight"]
        state["model.encoder.layers.0.fc1.weight"] = weight.to_sparse() if damage == "sparse" else weight.to(torch.complex64)
        torch.save(state, source / "pytorch_model.bin")
    with pytest.raises(ValueError, match=message):
        import_m2m100(str(source), tmp_path / "out", src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0])
    assert not (tmp_path / "out").exists()


def test_a_null_decoder_start_id_is_the_default_as_a_missing_one(imported, tmp_path):
    kind, _, hf_dir, ck = imported
    source = _edited(hf_dir, tmp_path, decoder_start_token_id=None)
    again = load_checkpoint(import_m2m100(str(source), tmp_path / "out", dtype=torch.float32,
                                          src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0]))
    assert again.config.decoder_start_id == ck.config.decoder_start_id == 2


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/pagemap"), reason="needs Linux's /proc/self/pagemap")
def test_a_tokenizer_file_that_cannot_be_read_is_named_and_an_unreadable_card_loses_nothing(imported, tmp_path):
    """Both as links to /proc/self/pagemap (a file whose read fails): the import said only "[Errno 22] Invalid
    argument", for the README after the model was converted, losing the whole import."""
    kind, _, hf_dir, _ = imported
    source = tmp_path / "src"
    shutil.copytree(hf_dir, source)
    (source / "README.md").unlink(missing_ok=True)
    (source / "README.md").symlink_to("/proc/self/pagemap")
    langs = dict(src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0])
    assert load_checkpoint(import_m2m100(str(source), tmp_path / "out", **langs)).config.d_model > 0
    (source / "sentencepiece.bpe.model").unlink()
    (source / "sentencepiece.bpe.model").symlink_to("/proc/self/pagemap")
    with pytest.raises(ValueError, match=r"sentencepiece\.bpe\.model: cannot be read"):
        import_m2m100(str(source), tmp_path / "again", **langs)
    assert not (tmp_path / "again").exists()


def _with_tensors(hf_dir, tmp_path, change):
    """A copy of the source whose model.safetensors holds change(its tensors)."""
    from safetensors.torch import load_file, save_file
    source = tmp_path / "src"
    shutil.copytree(hf_dir, source)
    tensors = load_file(str(source / "model.safetensors"))
    save_file(change(tensors), str(source / "model.safetensors"), metadata={"format": "pt"})
    return source


def _claim_unused_tensor(weights, numel: int) -> None:
    """Add to the header an F32 tensor of `numel` values after the data, the file grown sparse to fit it."""
    import struct
    data = weights.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    end = max(info["data_offsets"][1] for name, info in header.items() if name != "__metadata__")
    header["unused.weight"] = {"dtype": "F32", "shape": [numel], "data_offsets": [end, end + 4 * numel]}
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(weights, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data[8 + n:])
        f.truncate(8 + len(head) + end + 4 * numel)


def test_a_stored_tensor_the_model_does_not_use_costs_nothing_and_an_integer_weight_is_refused(imported, tmp_path):
    """An unused int64 buffer was a "corrupt header entry", and an unused tensor of 4 GiB (a sparse file) made the
    import refuse for 8 GiB it would never take: the bound counted the header's largest tensor, read or not."""
    kind, _, hf_dir, ck = imported
    langs = dict(src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0])
    source = _with_tensors(hf_dir, tmp_path, lambda t: {**t, "model.encoder.embed_positions._float_tensor":
                                                        torch.zeros(1, dtype=torch.int64)})
    _claim_unused_tensor(source / "model.safetensors", 1 << 30)
    again = load_checkpoint(import_m2m100(str(source), tmp_path / "out", dtype=torch.float32, **langs))
    assert all(torch.equal(again.model.state_dict()[k], v) for k, v in ck.model.state_dict().items())
    shutil.rmtree(tmp_path / "src")
    weight = "model.encoder.layers.0.fc1.weight"
    source = _with_tensors(hf_dir, tmp_path, lambda t: {**t, weight: (t[weight] * 10).long()})
    with pytest.raises(ValueError, match=rf"{weight} is stored as int64; a model's weights are floating-point"):
        import_m2m100(str(source), tmp_path / "again", **langs)
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize("start, message", [
    (0, "decoder_start_token_id is 0, config.json's is 2: transformers' generate would start decoding from 0"),
    ("2", "decoder_start_token_id must be a whole number, not '2'"),
])
def test_a_generation_config_that_starts_elsewhere_than_config_json_is_refused(imported, tmp_path, start, message):
    """generation_config.json was never read: one whose start id differs (a damaged or hand-edited folder) made
    transformers' generate translate from another token than the import does."""
    kind, _, hf_dir, _ = imported
    source = tmp_path / "src"
    shutil.copytree(hf_dir, source)
    generation = json.loads((source / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == 2                # as save_pretrained writes it: imports
    (source / "generation_config.json").write_text(json.dumps({**generation, "decoder_start_token_id": start}))
    with pytest.raises(ValueError, match=message) as caught:
        import_m2m100(str(source), tmp_path / "out", src_lang=PAIRS[kind][0], tgt_lang=PAIRS[kind][1][0])
    assert "generation_config.json" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()
