"""Import a Hugging Face Marian model (an OPUS-MT checkpoint), or an M2M100 / NLLB-200 one, as a checkpoint
of this project (`import_from_hf` picks by config.json's model_type).

What comes out is an ordinary checkpoint directory (explorer.store.checkpoint's format): every page
of the app, the beam trace, ablation, comparison and fine-tuning work on it as on a model trained
here. Its card.json records where it came from (explorer.store.card's model card: source,
licence if the source states one, languages, parameter count, domain).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from explorer.files import names
from explorer.interop import hf_source as src
from explorer.interop import m2m100
from explorer.interop.config_fields import SIZES, FieldError, check_field_types
from explorer.interop.m2m100_tokenizer import tokenizer_from_hf
from explorer.interop.marian import LOGITS_BIAS, ConversionError, hf_aliases, model_config_from_hf, state_from_hf
from explorer.model import Transformer
from explorer.model.skeleton import model_skeleton
from explorer.store.card import ModelCard, with_model_card
from explorer.store.checkpoint import save_checkpoint
from explorer.store.output_dirs import check_output_dir
from explorer.store.errors import CheckpointError
from explorer.store.weights import check_memory, load_bytes, read_header
from explorer.text.multilingual import MultilingualTokenizer
from explorer.text.vocab_tokenizer import VocabTokenizer


TOOL = "explorer.convert from-hf"


def import_marian(source: str, out: str | Path, *, dtype: torch.dtype = torch.float16, name: str | None = None,
                  src_lang: str | None = None, tgt_lang: str | None = None, domain: str | None = None,
                  overwrite: bool = False) -> Path:
    """Convert `source` (a local Marian directory or a hub id) into a checkpoint at `out`; returns its path.

    Checks, in order, before the model is built: config.json, the tokenizer files, and every
    tensor's name and shape against the config (so a file cannot make it allocate what it does
    not hold). `out` is checked first: only a new or empty directory or an earlier import is replaced
    (explorer.store.output_dirs). The checkpoint is written atomically
    (explorer.store.checkpoint.save_checkpoint).
    """
    directory, provenance = src.locate(source)
    check_output_dir(out, TOOL, overwrite=overwrite, inputs=[directory])   # before anything is read
    hf = src.read_json(directory / names.HF_CONFIG)
    found_src, found_tgt = (None, None) if src_lang and tgt_lang else src.languages(directory, provenance)
    src_lang, tgt_lang = src_lang or found_src, tgt_lang or found_tgt
    try:
        tokenizer = VocabTokenizer.load(directory, confined=False)   # a user's folder: a cache snapshot links out
    except (OSError, ValueError) as exc:
        raise ConversionError(f"{directory}: tokenizer: {exc}") from None
    get, weights_file = src.tensor_reader(directory)
    with _config_at(directory):
        cfg = model_config_from_hf(hf, tokenizer.special, logits_bias=False)
    bias = get(LOGITS_BIAS)
    if bias is not None and tuple(bias.reshape(-1).shape) != (cfg.tgt_vocab_size,):   # zeros or not, as any tensor
        raise ConversionError(f"{weights_file}: {LOGITS_BIAS} has shape {tuple(bias.shape)}, the config needs "
                              f"(1, {cfg.tgt_vocab_size})")
    # all zeros (as Marian's exports often are) need no bias; NaN != 0, so a damaged one is kept and refused
    if bias is not None and bool((bias != 0).any()):
        cfg = replace(cfg, final_logits_bias=True)
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise ConversionError(f"{directory}: the vocabulary has {tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size} "
                              f"entries, config.json says {cfg.src_vocab_size}/{cfg.tgt_vocab_size}")
    src.check_generation_start(directory, cfg.decoder_start_id)
    check_memory(str(weights_file), load_bytes(cfg, copies=2))     # the converted tensors beside the model
    model = _model_from(get, cfg, weights_file)

    facts = src.readme_facts(directory)
    card = with_model_card({}, ModelCard(
        source=provenance, license=facts.get("license"), languages=(src_lang, tgt_lang),
        parameters=model.num_parameters(), domain=domain or facts.get("domain"),
        converted=datetime.now(timezone.utc).isoformat(timespec="seconds"), tool=TOOL))
    meta = {"name": name or Path(out).name, "src_lang": src_lang, "tgt_lang": tgt_lang,
            "training": {"imported_from": provenance}}
    return save_checkpoint(out, model, tokenizer, meta=meta, dtype=dtype, card=card, output_of=TOOL,
                           overwrite=overwrite, inputs=(directory,))


@contextmanager
def _config_at(directory: Path):
    """A refusal of config.json's contents, naming the file."""
    try:
        yield
    except (ConversionError, FieldError) as exc:
        raise ConversionError(f"{directory / names.HF_CONFIG}: {exc}") from None


def _model_from(get, cfg, weights_file, names=None) -> Transformer:
    """Our model (eval mode) from a Hugging Face file's tensors (`get(hf_name)`), every shape checked against
    the config's before a tensor is used; `names`: the family's map of our names to its (Marian's when None)."""
    shapes = {n: tuple(p.shape) for n, p in model_skeleton(cfg).state_dict().items()}
    try:
        state = state_from_hf(get, cfg, shapes, names)
    except ConversionError as exc:
        raise ConversionError(f"{weights_file}: {exc}") from None
    model = Transformer(cfg)
    model.load_state_dict(state, strict=True)
    del state
    return model.eval()


def import_from_hf(source: str, out: str | Path, **options) -> Path:
    """import_marian or import_m2m100, as the source's config.json's model_type says."""
    directory, _ = src.locate(source)
    config = directory / names.HF_CONFIG
    hf = src.read_json(config)
    if not isinstance(hf, dict):
        raise ConversionError(f"{config}: not a JSON object")
    kind = hf.get("model_type")
    if kind == "marian":
        return import_marian(source, out, **options)
    if m2m100.is_m2m100(hf):
        return import_m2m100(source, out, **options)
    raise ConversionError(f"{config}: model_type is {m2m100.named_type(kind)}: only Marian (OPUS-MT) and "
                          "M2M100 / NLLB-200 models import")


def import_m2m100(source: str, out: str | Path, *, dtype: torch.dtype = torch.float16, name: str | None = None,
                  src_lang: str | None = None, tgt_lang: str | None = None, domain: str | None = None,
                  overwrite: bool = False) -> Path:
    """Convert `source` (a local M2M100 / NLLB-200 directory or a hub id) into a checkpoint at `out`.

    As import_marian, in the same order: config.json, the tokenizer (which must number exactly the
    vocabulary the weights have, give or take a few unused ids), the memory the import will take
    (from the config and, for model.safetensors, its header: refused in one line above the bound),
    then every tensor's name and shape. `src_lang`/`tgt_lang` become the checkpoint's default pair
    (the app and the commands translate with it unless told another); without them a command must be
    given --src-lang and --tgt-lang.
    """
    directory, provenance = src.locate(source)
    check_output_dir(out, TOOL, overwrite=overwrite, inputs=[directory])   # before anything is read
    hf = src.read_json(directory / names.HF_CONFIG)
    with _config_at(directory):
        if not m2m100.is_m2m100(hf):
            m2m100.model_config_from_hf(hf, MultilingualTokenizer.special)     # refuses, naming the model type
        check_field_types(hf, SIZES)                                # vocab_size first: the tokenizer is made for it
    tokenizer = tokenizer_from_hf(directory, hf["vocab_size"])
    if src_lang or tgt_lang:
        tokenizer = tokenizer.with_languages(src_lang, tgt_lang)
    with _config_at(directory):
        cfg = m2m100.model_config_from_hf(hf, tokenizer.special)
    src.check_generation_start(directory, cfg.decoder_start_id)
    get, weights_file = src.tensor_reader(directory)
    header = None
    if weights_file.name == names.HF_WEIGHTS[0]:
        try:
            header = read_header(weights_file)
        except CheckpointError as exc:
            raise ConversionError(str(exc)) from None
    wanted = m2m100.m2m100_name_map(cfg)
    read = {alias for theirs in wanted.values() for alias in hf_aliases(theirs)}   # what is left alone costs nothing
    check_memory(str(weights_file), load_bytes(cfg, header, copies=2, read=read))  # converted tensors beside the model
    model = _model_from(get, cfg, weights_file, wanted)

    facts = src.readme_facts(directory)
    card = with_model_card({}, ModelCard(
        source=provenance, license=facts.get("license"), languages=(tokenizer.src_lang, tokenizer.tgt_lang),
        parameters=model.num_parameters(), domain=domain or facts.get("domain"),
        converted=datetime.now(timezone.utc).isoformat(timespec="seconds"), tool=TOOL))
    meta = {"name": name or Path(out).name, "src_lang": tokenizer.src_lang, "tgt_lang": tokenizer.tgt_lang,
            "training": {"imported_from": provenance}}
    return save_checkpoint(out, model, tokenizer, meta=meta, dtype=dtype, card=card, output_of=TOOL,
                           overwrite=overwrite, inputs=(directory,))
