"""A checkpoint's training-word index: read where it is kept, or counted from the checkpoint's own
training split and calibrated on its held-out pairs, then kept (explorer.studies.grounding.index).

Which data: the dataset the checkpoint's config.json says it was trained on (training.dataset: "bible",
"numbers", or a TSV a fine-tune was given), split as the trainer split it (explorer.data's load_corpus,
same seed); its held-out pairs are the checkpoint's own test.tsv where it ships one. An imported model
names no training data, so it has no index, and the verdict says so (NoTrainingData).

The gradient store (influence.py) is built the same way, from the same training split, but per weights:
a fine-tune's store holds its own corpus's pairs only.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from explorer.data import DataError, load_corpus
from explorer.evaluation.scores import held_out_pairs
from explorer.studies.common.context import RunContext
from explorer.studies.common.training_data import (NoTrainingData, current_corpus_name, dataset_of, training_pairs,
                                                  write_shipped)
from explorer.studies.grounding import index as ix
from explorer.studies.grounding import influence, states
from explorer.studies.grounding.gradients import watched_linears
from explorer.studies.grounding.verdict import calibrate, calibrate_states


def build(checkpoint: str | Path, meta: dict) -> ix.TrainingIndex:
    """Count the checkpoint's training split and calibrate on its development split (held out from
    training, and apart from the test pairs the verdict is measured on); on its test pairs when the
    corpus has no development split. Does not save."""
    dataset = dataset_of(meta)
    try:
        corpus = load_corpus(dataset)
        calibration, source = (corpus.dev, "development pairs") if corpus.dev else \
            (held_out_pairs(checkpoint, meta)[0], "test pairs")
    except DataError as err:
        raise NoTrainingData(f"the training data of this model ({dataset}) cannot be read here: {err}") from None
    index = ix.count(corpus.train, dataset, meta.get("src_lang"), meta.get("tgt_lang"))
    return calibrate(index, [p.src for p in calibration], source)


def ensure(checkpoint: str | Path, meta: dict) -> ix.TrainingIndex:
    """The index of the checkpoint's dataset: the shipped or kept one when it is usable and counts this
    dataset, else built and kept under runs/grounding/. A damaged shipped index is refused, not rebuilt
    over (IndexUnusable: one line)."""
    dataset = dataset_of(meta)
    path = ix.index_path(current_corpus_name(dataset) or dataset)     # an edited file is another corpus
    if path.exists():
        try:
            kept = ix.load(path)
        except ix.IndexUnusable:
            if ix.is_shipped(path):
                raise
            kept = None
        if kept is not None and kept.dataset == dataset:
            return kept
    index = build(checkpoint, meta)
    if not ix.is_shipped(path):
        ix.save(index, path)
    return index


def ensure_store(model, tokenizer, meta: dict, context: RunContext = RunContext()) -> influence.GradientStore:
    """The training pairs' gradient store of these weights and this dataset: the kept one when it is usable,
    else built (one pass over the training split) and kept under runs/grounding/. One that cannot be used
    (stale, foreign, damaged) is built again, and the log says why."""
    dataset, sha = dataset_of(meta), str(meta.get("weights_sha256") or "")
    if not sha:
        raise NoTrainingData("this checkpoint records no weights hash, so a gradient store could not be told "
                             "from another checkpoint's")
    pairs = training_pairs(meta)
    path = influence.store_path(dataset, sha)
    layers = [name for name, _ in watched_linears(model)]
    if path.exists():
        try:
            return influence.load(path, dataset, sha, len(pairs), layers)
        except influence.StoreUnusable as err:
            context.say(f"building the gradient store again: {err}")
    store = influence.build(model, tokenizer, pairs, dataset, sha, context)
    influence.save(store, path)
    return store


def held_out_sources(checkpoint: str | Path, meta: dict) -> tuple[list[str], str]:
    """The sentences a threshold is calibrated on: the dataset's development split, else the checkpoint's
    test pairs (as build)."""
    try:
        dev = load_corpus(dataset_of(meta)).dev
        if dev:
            return [p.src for p in dev], "development pairs"
    except DataError:
        pass
    try:
        return [p.src for p in held_out_pairs(checkpoint, meta)[0]], "test pairs"
    except DataError as err:
        raise NoTrainingData(f"no held-out sentences to calibrate on: {err}") from None


def kept_states(model, meta: dict, pairs: int, side: str = "source") -> states.StateMap | None:
    """The checkpoint's encoder-state map (decoder-state map with side="output") when one is shipped or kept
    and usable (its pair numbers within the `pairs` training pairs of the index), else None (never builds;
    a damaged shipped map is refused: MapUnusable). kept_states_and_why says why a kept one was not used."""
    return kept_states_and_why(model, meta, pairs, side)[0]


def kept_states_and_why(model, meta: dict, pairs: int, side: str = "source") -> tuple[states.StateMap | None, str]:
    """(map, "") as kept_states, or (None, why) when a map kept under runs/grounding/ is there but cannot be
    used (truncated, empty, a directory, stale): its one-line reason, naming the file, as plain data for the
    command's warning and the app's note. Why: such a map was once skipped in silence, and the verdicts
    changed with nothing said (the verdict then reads the training data's counts alone)."""
    dataset, sha = dataset_of(meta), str(meta.get("weights_sha256") or "")
    path = states.map_path(dataset, sha, side)
    if not sha or not (path.exists() or path.is_symlink()):
        return None, ""
    try:
        return states.load(path, dataset, sha, model.cfg.d_model, pairs, side), ""
    except states.MapUnusable as err:
        if states.is_shipped(path):
            raise
        return None, str(err)


def calibrated_map(checkpoint: str | Path, model, tokenizer, meta: dict, index: ix.TrainingIndex,
                   context: RunContext = RunContext()) -> states.StateMap:
    """The encoder-state map of the checkpoint's training sources (one encoder pass), calibrated on its
    held-out sentences against `index` (verdict.calibrate_states). Does not save."""
    dataset, sha = dataset_of(meta), str(meta.get("weights_sha256") or "")
    if not sha:
        raise NoTrainingData("this checkpoint records no weights hash, so its encoder-state map could not be told "
                             "from another checkpoint's")
    smap = states.build(model, tokenizer, [p.src for p in training_pairs(meta)], dataset, sha, context)
    held, source = held_out_sources(checkpoint, meta)
    per_sentence = states.source_states(model, tokenizer, held, context, stage="held-out sentences")
    calibration = calibrate_states(index, held, [states.distance(smap, s) for s in per_sentence], source)
    return dataclasses.replace(smap, calibration=calibration)


def ensure_states(checkpoint: str | Path, model, tokenizer, meta: dict, index: ix.TrainingIndex,
                  context: RunContext = RunContext()) -> states.StateMap:
    """The checkpoint's encoder-state map: the kept one, else built (calibrated_map) and kept under
    runs/grounding/."""
    found, why = kept_states_and_why(model, meta, index.pairs)
    if found is not None and found.calibration.get("threshold") is not None:
        return found
    path = states.runs_map_path(dataset_of(meta), str(meta.get("weights_sha256") or ""))
    if path.is_dir():               # refused before the encoder pass, not as an OSError after it
        raise states.MapUnusable(f"{path}: a directory where the map is kept: remove it, then build the map")
    if why:
        context.say(f"building the encoder-state map again: {why}")
    smap = calibrated_map(checkpoint, model, tokenizer, meta, index, context)
    states.save(smap, path)
    return smap


def ensure_output_states(model, tokenizer, meta: dict, context: RunContext = RunContext()) -> states.StateMap:
    """The checkpoint's decoder-state map (an output word's nearest training contexts): the kept one, else
    built (one teacher-forced pass over the training pairs) and kept under runs/grounding/. Not calibrated:
    the verdict does not read it."""
    dataset, sha = dataset_of(meta), str(meta.get("weights_sha256") or "")
    if not sha:
        raise NoTrainingData("this checkpoint records no weights hash, so its decoder-state map could not be told "
                             "from another checkpoint's")
    pairs = training_pairs(meta)
    found = kept_states(model, meta, len(pairs), "output")
    if found is not None:
        return found
    outputs = states.training_outputs(model, tokenizer, [p.tgt for p in pairs])
    smap = states.build(model, tokenizer, [p.src for p in pairs], dataset, sha, context, train_outputs=outputs)
    states.save(smap, states.runs_map_path(dataset, sha, "output"))
    return smap


def ship(checkpoint: str | Path, context: RunContext = RunContext()) -> list[Path]:
    """Write a checkpoint's grounding files where the repository ships them (checkpoints/grounding/): its
    dataset's index and training pairs (both per dataset) and its encoder-state map (per weights), each
    built from the training data as the app would build it. The files it wrote."""
    from explorer.store.checkpoint import load_checkpoint
    ckpt = load_checkpoint(checkpoint)
    dataset = dataset_of(ckpt.meta)
    index = build(ckpt.path, ckpt.meta)
    written = [ix.save(index, ix.shipped_path(dataset)), write_shipped(dataset)]
    smap = calibrated_map(ckpt.path, ckpt.model, ckpt.tokenizer, ckpt.meta, index, context)
    written.append(states.save(smap, states.shipped_map_path(smap.dataset, smap.weights_sha256)))
    return written
