"""The NLLB-size benchmark's model and tokenizer are the real model's shape (the run itself takes minutes
and gigabytes, so only its parts are checked here): the config's values, and a padded sentencepiece model
that the import's tokenizer numbers exactly as NLLB-200 does."""
from __future__ import annotations

import pytest

from benchmarks import nllb
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
