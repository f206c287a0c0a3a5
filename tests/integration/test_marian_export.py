"""Exporting the shipped bible-es-en (python -m explorer.convert to-hf / to-ct2): Hugging Face's
MarianMTModel and MarianTokenizer load the directory unchanged and give the same ids, the same
logits (the interleaved sinusoids mapped onto Marian's halves layout by the residual permutation)
and the same beam-5 n-best on 20 test sentences; CTranslate2 (float32) gives the same beam-5
translation. CTranslate2 ranks lower hypotheses of its n-best differently (it finishes hypotheses
by its own rule), so only the best is compared there, and the scores of hypotheses both found."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import beam_search
from explorer.store.checkpoint import load_checkpoint
from explorer.text.encoding import source_ids
from support.numerics import model_atol
from support.waiting import run_watched

transformers = pytest.importorskip("transformers")
SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "bible-es-en"
MAX_NEW = 100
PATIENCE = 4     # CTranslate2 stops when beam x patience hypotheses finished; ours stops on the exact bound
BEAM = DecodeConfig(beam_size=5, n_best=5, length_penalty="average", max_len_a=0, max_len_b=MAX_NEW)


@pytest.fixture(scope="module")
def shipped():
    ck = load_checkpoint(SHIPPED)
    rows = [line.split("\t") for line in (SHIPPED / "test.tsv").read_text().splitlines()[1:21]]
    return ck, [row[1] for row in rows]


def convert(*args: str) -> None:
    run = run_watched([sys.executable, "-m", "explorer.convert", *args], f"explorer.convert {args[0]}")
    assert run.returncode == 0, run.stderr


def until_eos(seq: list[int], eos: int) -> list[int]:
    return seq[:seq.index(eos) + 1] if eos in seq else seq


@pytest.fixture(scope="module")
def exported(tmp_path_factory, shipped):
    out = tmp_path_factory.mktemp("export") / "hf"
    convert("to-hf", str(SHIPPED), str(out))
    model = transformers.MarianMTModel.from_pretrained(out).eval()
    return model, transformers.MarianTokenizer.from_pretrained(out)


def test_hugging_face_tokenizes_and_scores_like_us(shipped, exported):
    ck, sources = shipped
    hf, tok = exported
    ids = [source_ids(ck.tokenizer, s, ck.config.max_len, ck.config.special) for s in sources]
    assert tok(sources)["input_ids"] == ids
    width = max(map(len, ids))
    src = torch.tensor([row + [ck.config.pad_id] * (width - len(row)) for row in ids])       # [20, S]
    tgt_in = torch.randint(4, ck.config.tgt_vocab_size, (len(ids), 9))                      # [20, T]
    tgt_in[:, 0] = ck.config.decoder_start_id
    with torch.no_grad():
        ours = ck.model.logits(src, tgt_in)                                                # [20, T, V]
        theirs = hf(input_ids=src, attention_mask=(src != ck.config.pad_id).long(), decoder_input_ids=tgt_in).logits
    # Hugging Face's implementation against ours: other kernels and orders, so within model_atol
    torch.testing.assert_close(ours, theirs, rtol=0, atol=model_atol(ck.model, theirs, vocab=False))


def test_hugging_face_beam_search_gives_our_n_best(shipped, exported):
    ck, sources = shipped
    hf, tok = exported
    eos = ck.config.eos_id
    for text in sources:
        ids = torch.tensor([source_ids(ck.tokenizer, text, ck.config.max_len, ck.config.special)])   # [1, S]
        ours = beam_search(ck.model, ids, BEAM)[0].hypotheses
        got = hf.generate(input_ids=ids, num_beams=5, num_return_sequences=5, max_new_tokens=MAX_NEW,
                          length_penalty=1.0, early_stopping="never")
        assert [h.ids for h in ours] == [until_eos(seq.tolist()[1:], eos) for seq in got]
        assert ck.tokenizer.decode(ours[0].ids) == tok.decode(got[0], skip_special_tokens=True)


def test_ctranslate2_gives_our_beam_translation(shipped, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    ck, sources = shipped
    convert("to-ct2", str(SHIPPED), str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", compute_type="float32")
    piece_id = {ck.tokenizer.id_to_piece(i, "tgt"): i for i in range(ck.config.tgt_vocab_size)}
    never = [[ck.tokenizer.id_to_piece(i, "tgt")] for i in ck.config.special.never_output]
    shared = 0
    for text in sources:
        ids = source_ids(ck.tokenizer, text, ck.config.max_len, ck.config.special)
        ours = beam_search(ck.model, torch.tensor([ids]), BEAM)[0].hypotheses
        result = translator.translate_batch([[ck.tokenizer.id_to_piece(i, "src") for i in ids]], beam_size=5,
                                            num_hypotheses=5, length_penalty=1.0, max_decoding_length=MAX_NEW,
                                            return_scores=True, suppress_sequences=never,
                                            patience=PATIENCE)[0]
        theirs = {tuple(piece_id[p] for p in hyp) + (ck.config.eos_id,): score
                  for hyp, score in zip(result.hypotheses, result.scores)}
        assert ours[0].ids == [piece_id[p] for p in result.hypotheses[0]] + [ck.config.eos_id]
        for hyp in ours:
            if tuple(hyp.ids) in theirs:
                assert abs(theirs[tuple(hyp.ids)] - hyp.normalized) < 1e-3
                shared += 1
    assert shared >= 3 * len(sources)
