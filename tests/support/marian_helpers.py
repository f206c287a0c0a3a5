"""Hugging Face Marian models made by the tests (no model can be downloaded here): random weights,
two sentencepiece models trained on a few lines, one shared vocab.json in Marian's layout (</s> 0,
<unk> 1, pieces, <pad> last), saved with save_pretrained. Small by default; `vocab_size` pads the
vocabulary with made-up pieces up to a real OPUS-MT size (58,101), since the vocabulary, not the
text, sets the cost of every decoding step and the ids Marian's special tokens get."""
from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from benchmarks.fixtures import made_up_words   # a vocabulary's filler, shared with the base-size checkpoint

SRC_LINES = [
    "el presidente habló con los periodistas sobre la economía",
    "la casa es grande y la puerta está abierta",
    "mañana vamos a la playa con nuestros amigos",
    "los niños juegan en el parque cerca del río",
    "ella escribe una carta a su hermano",
    "el tren sale a las ocho de la mañana",
    "no sé dónde está mi libro",
    "hace mucho frío en invierno",
]
TGT_LINES = [
    "the president spoke with the journalists about the economy",
    "the house is big and the door is open",
    "tomorrow we go to the beach with our friends",
    "the children play in the park near the river",
    "she writes a letter to her brother",
    "the train leaves at eight in the morning",
    "i do not know where my book is",
    "it is very cold in winter",
]
TEST_SOURCES = ["el presidente habló con los niños", "la puerta está abierta", "mañana vamos al río",
                "hace frío", "su hermano escribe una carta sobre la economía"]


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   minloglevel=2, num_threads=1)
    return buf.getvalue()


def pieces_of(model: bytes) -> list[str]:
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]


def write_marian_tokenizer(directory: Path, *, vocab_size: int | None = None, src_lines: list[str] = SRC_LINES,
                           tgt_lines: list[str] = TGT_LINES) -> int:
    """source.spm, target.spm and a shared vocab.json in `directory`; returns the vocabulary size.

    With `vocab_size`, made-up word pieces ("▁" + a random word, which the sentencepiece models
    never produce) fill the vocabulary up to that size, <pad> still last (id vocab_size - 1)."""
    src, tgt = train_spm(src_lines, 60), train_spm(tgt_lines, 60)
    pieces = list(dict.fromkeys(pieces_of(src) + pieces_of(tgt)))
    if vocab_size is not None:
        room = vocab_size - 3 - len(pieces)
        if room < 0:
            raise ValueError(f"vocab_size {vocab_size} is smaller than the {len(pieces) + 3} entries needed")
        known = set(pieces)
        filler = (p for p in ("\u2581" + w for w in made_up_words(room + len(pieces))) if p not in known)
        pieces += [next(filler) for _ in range(room)]
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "source.spm").write_bytes(src)
    (directory / "target.spm").write_bytes(tgt)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps({"source_lang": "es", "target_lang": "en"}))
    return len(vocab)


def random_marian(directory: Path, *, d_model: int = 32, heads: int = 4, ffn: int = 64, layers: int = 2,
                  activation: str = "swish", seed: int = 0, eos_bias: float = 3.0, std: float = 0.3,
                  vocab_size: int | None = None, max_positions: int = 128, src_lines: list[str] = SRC_LINES,
                  tgt_lines: list[str] = TGT_LINES, dtype: torch.dtype = torch.float32):
    """A random MarianMTModel with OPUS-MT's options (swish, halves positions, scaled embeddings, a
    non-zero final_logits_bias with EOS favoured so outputs end at varied lengths) saved with
    save_pretrained in `directory` (its weights in `dtype`), with its tokenizer files (`vocab_size`:
    see write_marian_tokenizer). Returns the HF model (eval mode, float32)."""
    from transformers import MarianConfig, MarianMTModel

    vocab = write_marian_tokenizer(directory, vocab_size=vocab_size, src_lines=src_lines, tgt_lines=tgt_lines)
    pad = vocab - 1
    config = MarianConfig(vocab_size=vocab, decoder_vocab_size=vocab, d_model=d_model, encoder_layers=layers,
                          decoder_layers=layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
                          encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, activation_function=activation,
                          max_position_embeddings=max_positions, scale_embedding=True, pad_token_id=pad, eos_token_id=0,
                          decoder_start_token_id=pad, forced_eos_token_id=None, init_std=std)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, 0] = eos_bias                             # EOS
    if dtype == torch.float32:
        model.save_pretrained(directory)
    else:                                       # a half-size file (OPUS-MT's are float32; the import casts)
        model.to(dtype).save_pretrained(directory)
        model.to(torch.float32)
    return model
