"""Hand a checkpoint of this project to the ecosystem: a Hugging Face Marian directory, or CTranslate2.

`export_marian` writes what `transformers.MarianMTModel.from_pretrained` and
`MarianTokenizer.from_pretrained` load unchanged (config.json, generation_config.json,
model.safetensors, source.spm, target.spm, vocab.json [+ target_vocab.json], tokenizer_config.json,
README.md), computing the same logits (explorer.interop.marian: names, options, the positional
layout). It needs neither transformers nor torch beyond what loading our checkpoint needs.
`export_ct2` writes a CTranslate2 model (explorer.interop.ct2; ctranslate2 is the `ct2` extra).

Both write into a hidden temporary sibling and rename it into place, so `out` is either absent,
the old directory, or the whole new one; `out` is checked before the checkpoint is read, and only a
new or empty directory or an earlier output of the same command is replaced
(explorer.store.output_dirs: `overwrite` for one edited since).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from explorer.files import names as n
from explorer.interop import ct2
from explorer.interop.marian import check_exportable, hf_config, hf_generation_config, state_to_hf
from explorer.store.card import ModelCard, model_card
from explorer.store import checkpoint as checkpoint_store   # load_checkpoint read at each call: a stand-in is seen
from explorer.store.output_dirs import check_output_dir, write_output_dir


def marian_tokenizer_files(tokenizer) -> dict[str, bytes]:
    """Marian's tokenizer files for a tokenizer of ours: an imported one's own files, or for this
    project's sentencepiece models, each model as source.spm/target.spm and its piece list as
    vocab.json (ids unchanged, so the special ids stay where the model has them)."""
    models = tokenizer.model_bytes()
    if n.MARIAN_VOCAB in models:
        return dict(models)

    def vocab(side: str, size: int) -> bytes:
        return json.dumps({tokenizer.id_to_piece(i, side): i for i in range(size)}, ensure_ascii=False,
                          indent=1).encode("utf-8")

    if tokenizer.joint:
        [data] = models.values()
        return {n.MARIAN_SRC_SPM: data, n.MARIAN_TGT_SPM: data, n.MARIAN_VOCAB: vocab("src", tokenizer.src_vocab_size)}
    return {n.MARIAN_SRC_SPM: models[n.SRC_TOKENIZER], n.MARIAN_TGT_SPM: models[n.TGT_TOKENIZER],
            n.MARIAN_VOCAB: vocab("src", tokenizer.src_vocab_size),
            n.MARIAN_TGT_VOCAB: vocab("tgt", tokenizer.tgt_vocab_size)}


TO_HF, TO_CT2 = "explorer.convert to-hf", "explorer.convert to-ct2"


def export_marian(checkpoint: str | Path, out: str | Path, *, dtype: torch.dtype = torch.float32,
                  overwrite: bool = False) -> Path:
    """Write checkpoint `checkpoint` as a Hugging Face Marian directory at `out`; returns its path."""
    check_output_dir(out, TO_HF, overwrite=overwrite, inputs=[checkpoint])   # before anything is read
    loaded = checkpoint_store.load_checkpoint(checkpoint)
    check_exportable(loaded.config)                       # before anything is written
    files = marian_tokenizer_files(loaded.tokenizer)
    tensors = {name: t.to(dtype) for name, t in state_to_hf(loaded.model).items()}
    cfg = loaded.config
    texts = {
        n.HF_CONFIG: {**hf_config(cfg), "torch_dtype": str(dtype).removeprefix("torch.")},
        n.HF_GENERATION_CONFIG: hf_generation_config(cfg),
        n.HF_TOKENIZER_CONFIG: {"source_lang": loaded.meta.get("src_lang"), "target_lang": loaded.meta.get("tgt_lang"),
                                  "model_max_length": cfg.max_len, "separate_vocabs": n.MARIAN_TGT_VOCAB in files,
                                  "tokenizer_class": "MarianTokenizer"},
    }

    def write(tmp: Path) -> None:
        save_file(tensors, str(tmp / n.HF_WEIGHTS[0]), metadata={"format": "pt"})
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        for name, data in texts.items():
            (tmp / name).write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        (tmp / n.HF_README).write_text(_readme(loaded), encoding="utf-8")
    return _write_whole(Path(out), TO_HF, write, overwrite, checkpoint)


def export_ct2(checkpoint: str | Path, out: str | Path, *, quantization: str | None = None,
               overwrite: bool = False) -> Path:
    """A CTranslate2 model of `checkpoint` at `out` (quantization: None keeps float32; "int8", ...),
    built by explorer.interop.ct2 from the loaded model."""
    check_output_dir(out, TO_CT2, overwrite=overwrite, inputs=[checkpoint])
    try:
        import ctranslate2  # noqa: F401  (fail before loading anything; an optional extra, so imported here)
    except ImportError:
        raise RuntimeError("to-ct2 needs ctranslate2: pip install -e '.[ct2]'") from None
    loaded = checkpoint_store.load_checkpoint(checkpoint)
    return _write_whole(Path(out), TO_CT2, lambda tmp: ct2.convert(loaded.model, loaded.tokenizer, tmp, quantization),
                        overwrite, checkpoint)


def _write_whole(target: Path, tool: str, write, overwrite: bool, checkpoint) -> Path:
    """write(tmp) on a hidden sibling directory, fsync it, and swap it in for `target` if it still may be
    replaced (write_output_dir finishes what an interrupted export of ours left, after its check)."""
    return write_output_dir(target, tool, write, overwrite=overwrite, inputs=[checkpoint])


def _readme(loaded) -> str:
    cfg, card = loaded.config, model_card(loaded.card) or ModelCard()
    langs = f"{loaded.meta.get('src_lang') or '?'} -> {loaded.meta.get('tgt_lang') or '?'}"
    return (f"# {loaded.name}\n\nExported by Transformer Explorer (`python -m explorer convert to-hf`) from a checkpoint "
            f"of {loaded.model.num_parameters():,} parameters: {langs}, d_model {cfg.d_model}, {cfg.n_heads} heads, "
            f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers.\n\n"
            f"Source: {card.source or 'trained by Transformer Explorer'}. "
            f"Licence: {card.license or 'as its source'}. Domain: {card.domain or 'not stated'}.\n")
