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

from pathlib import Path

from explorer.data import DataError, load_corpus
from explorer.evaluation.scores import held_out_pairs
from explorer.studies.common.context import RunContext
from explorer.studies.grounding import index as ix
from explorer.studies.grounding import concordance, influence
from explorer.studies.grounding.gradients import watched_linears
from explorer.studies.grounding.verdict import calibrate


class NoTrainingData(ValueError):
    """The checkpoint names no training data that can be read here; the message says which and why."""


def dataset_of(meta: dict) -> str:
    training = meta.get("training") if isinstance(meta, dict) else None
    dataset = training.get("dataset") if isinstance(training, dict) else None
    if not isinstance(dataset, str) or not dataset.strip():
        raise NoTrainingData("this model names no training data (an imported model, or one trained elsewhere), "
                             "so there is nothing to ground its translations in")
    return dataset


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
    path = ix.index_path(dataset)
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


def training_pairs(meta: dict) -> list:
    """The checkpoint's training split (the pairs its index counted and its gradient store holds): the
    repository's copy when it ships one (concordance.py), else the dataset read here."""
    dataset = dataset_of(meta)
    try:
        return concordance.training_pairs(dataset)
    except (DataError, concordance.PairsUnusable) as err:
        raise NoTrainingData(f"the training data of this model ({dataset}) cannot be read here: {err}") from None


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
