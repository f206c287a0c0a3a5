"""The NLLB-size benchmark's model and tokenizer are the real model's shape (the run itself takes minutes
and gigabytes, so only its parts are checked here): the config's values, and a padded sentencepiece model
that the import's tokenizer numbers exactly as NLLB-200 does."""
from __future__ import annotations

import pytest

from benchmarks import nllb, nllb_analyses
from explorer.interop.m2m100_tokenizer import tokenizer_from_hf


def test_the_config_is_nllb_600m():
    pytest.importorskip("transformers")
    cfg = nllb.nllb_config()
    assert (cfg.vocab_size, cfg.d_model, cfg.encoder_layers, cfg.decoder_layers, cfg.encoder_attention_heads,
            cfg.encoder_ffn_dim, cfg.max_position_embeddings, cfg.scale_embedding, cfg.activation_function) == \
        (256_206, 1024, 12, 12, 16, 4096, 1024, True, "relu")


def test_the_padded_tokenizer_numbers_nllb_ids(tmp_path):
    (tmp_path / "sentencepiece.bpe.model").write_bytes(nllb.padded_spm(nllb.NLLB_PIECES))
    tok = tokenizer_from_hf(tmp_path, nllb.NLLB_VOCAB).with_languages(nllb.SRC, nllb.TGT)
    assert tok.vocab_size == 256_206
    assert tok.languages["eng_Latn"] == 256_047 and tok.forced_target == [256_047]     # as NLLB-200's tokenizer


def test_the_analyses_stage_times_each_analysis_on_a_tiny_nllb(tmp_path):
    """`--analyses`' stage on a tiny random NLLB imported as the benchmark imports it: every analysis it
    times ran (a figure beside the greedy one), the refused ones say why, and the greedy output starts with
    the forced target tag."""
    import argparse

    import torch
    pytest.importorskip("transformers")
    from explorer.interop.hf_import import import_m2m100
    from support.m2m100_helpers import random_m2m100

    torch.set_num_threads(1)
    random_m2m100(tmp_path / "hf", kind="nllb", d_model=32, heads=4, ffn=64, layers=2, seed=0, eos_bias=4.0)
    import_m2m100(str(tmp_path / "hf"), tmp_path / "models" / "nllb-600m", dtype=torch.float16, src_lang=nllb.SRC,
                  tgt_lang=nllb.TGT)
    args = argparse.Namespace(src_lang=nllb.SRC, tgt_lang=nllb.TGT, analyses_only="", search_beams="1,2", ig_steps=2,
                              exact_seconds=1)
    result = nllb_analyses.stage_analyses(tmp_path, args)
    timed = {"greedy", "teacher-forced forward", "contributions", "align attention", "align grad-x-input",
             "align integrated-gradients", "lens", "heads unit", "search"}
    assert all(result["seconds"][name] > 0 for name in timed)
    assert result["ratio_to_greedy"]["greedy"] == 1.0
    assert result["seconds"]["patching"] is not None or result["notes"]["patching"]   # or refused, with the reason
    assert all(result["seconds"][name] is None and result["notes"][name] for name in nllb_analyses.REFUSED)
    assert len(result["forced_target"]) == 1 and result["forced_target"][0] > 0
    # the grids timed on a hand-made pair when every swap translates alike (as the 600M-shape random model does)
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.common.command import bound
    from explorer.studies.patching.grids import pair_grids

    ckpt = bound(load_checkpoint(tmp_path / "models" / "nllb-600m"), nllb.SRC, nllb.TGT)
    pair = nllb_analyses._hand_made_pair(ckpt.model, ckpt.tokenizer, nllb_analyses.ANALYSIS_SENTENCE, nllb_analyses.ANALYSIS_CORRUPT[0],
                                result["forced_target"])
    assert pair.prefix == result["forced_target"] and pair.clean_token != pair.corrupt_token
    assert pair_grids(ckpt.model, pair).grids["encoder_resid"]["denoise"].shape[1] == len(pair.clean_src)
