"""Hugging Face M2M100 and NLLB models made by the tests (no model can be downloaded here): random weights,
a BPE sentencepiece model trained on a few lines of three languages, and the tokenizer files each kind
ships: M2M100's vocab.json (fairseq's <s> <pad> </s> <unk>, then the pieces) with its tokenizer_config.json,
NLLB's tokenizer.json and tokenizer_config.json as transformers' NllbTokenizer saves them (its language
tokens numbered there). Saved with save_pretrained, as from the hub."""
from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from support.marian_helpers import SRC_LINES, TGT_LINES

FR_LINES = ["le président a parlé avec les journalistes de l'économie", "la maison est grande et la porte est ouverte",
            "demain nous allons à la plage avec nos amis", "les enfants jouent dans le parc près de la rivière"]
TEST_SOURCES = ["el presidente habló con los niños", "la puerta está abierta", "mañana vamos al río",
                "hace frío", "su hermano escribe una carta sobre la economía"]


def train_bpe(lines: list[str], vocab_size: int = 150) -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size,
                                   model_type="bpe", character_coverage=1.0, hard_vocab_limit=False,
                                   minloglevel=2, num_threads=1)
    return buf.getvalue()


def write_tokenizer(directory: Path, kind: str) -> int:
    """The tokenizer files of `kind` ("m2m100" or "nllb") in `directory`; returns the model's vocabulary
    size (the tokenizer's ids, plus the unused ones each kind has: M2M100's 8 made-up words, NLLB's 2)."""
    directory.mkdir(parents=True, exist_ok=True)
    model = train_bpe(SRC_LINES + TGT_LINES + FR_LINES)
    (directory / "sentencepiece.bpe.model").write_bytes(model)
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model)
    if kind == "m2m100":
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for i in range(3, sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "M2M100Tokenizer", "language_codes": "m2m100", "num_madeup_words": 8}))
        return len(vocab) + 100 + 8
    from transformers import NllbTokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
    tok = NllbTokenizer.from_pretrained(str(directory), additional_special_tokens=FAIRSEQ_LANGUAGE_CODES)
    tok.save_pretrained(str(directory))
    return len(tok) + 2


def reference_tokenizer(directory: Path, kind: str, src_lang: str, tgt_lang: str):
    """transformers' own tokenizer of a directory write_tokenizer made (the reference, in tests only)."""
    if kind == "m2m100":
        from transformers import M2M100Tokenizer
        return M2M100Tokenizer.from_pretrained(str(directory), src_lang=src_lang, tgt_lang=tgt_lang)
    from transformers import NllbTokenizer
    return NllbTokenizer.from_pretrained(str(directory), src_lang=src_lang, tgt_lang=tgt_lang)


def random_m2m100(directory: Path, *, kind: str = "m2m100", d_model: int = 32, heads: int = 4, ffn: int = 64,
                  layers: int = 2, seed: int = 0, std: float = 0.3, eos_bias: float = 7.0,
                  max_positions: int = 128, tied: bool = True):
    """A random M2M100ForConditionalGeneration (pre-LN, final norms, fairseq's sinusoids, scaled and shared
    embeddings) with `kind`'s tokenizer, saved in `directory`. The final LayerNorms are not 1 / 0, and the
    decoder's final norm leans towards </s> by `eos_bias` so outputs end at varied lengths. `tied` False:
    tie_word_embeddings false (the encoder's and decoder's embeddings and lm_head three matrices). Returns
    the HF model (eval mode, float32)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    vocab = write_tokenizer(directory, kind)
    config = M2M100Config(vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                          encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                          decoder_ffn_dim=ffn, max_position_embeddings=max_positions, scale_embedding=True,
                          pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                          activation_function="relu", init_std=std, dropout=0.1, attention_dropout=0.0,
                          encoder_layerdrop=0.0, decoder_layerdrop=0.0, tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
        eos_row = model.model.shared.weight[2]
        model.model.decoder.layer_norm.bias += eos_bias * eos_row / eos_row.norm() ** 2
    model.save_pretrained(directory)
    return model


def imported_es_en(root: Path) -> Path:
    """A small random M2M100 (random_m2m100's 32-wide, 2-layer model, seed 0, ends at varied lengths) saved
    under root/hf and imported as es -> en into root/ours, one thread: the analyses' and commands' model."""
    from explorer.interop.hf_import import import_from_hf

    torch.set_num_threads(1)
    random_m2m100(root / "hf", kind="m2m100", d_model=32, heads=4, ffn=64, layers=2, seed=0, eos_bias=4.0)
    return import_from_hf(str(root / "hf"), root / "ours", dtype=torch.float32, src_lang="es", tgt_lang="en")
