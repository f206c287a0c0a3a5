"""The scorecard as a job: its training corpus for eflomal, and its result written atomically.

The CLI and the app's background job both go through run_to_file, so a result on disk is always
whole (write_json_atomic), and a cancelled run leaves no file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from explorer.align.scorecard import run_scorecard
from explorer.files.atomic import read_json_object, write_json_atomic
from explorer.runtime.split import ONE


def training_pairs(meta: dict, held_out: Sequence) -> tuple[Sequence, str]:
    """What eflomal learns from besides the gold pairs: the checkpoint's training corpus when it can
    be loaded or built here (numbers: always; bible: with the SWORD packages), else the held-out pairs."""
    from explorer.data import DataError, load_corpus

    dataset = (meta.get("training") or {}).get("dataset")
    if dataset:
        try:
            corpus = load_corpus(dataset)
            return corpus.train, f"the {dataset} training corpus"
        except (DataError, OSError, ValueError):
            pass
    return list(held_out), "the checkpoint's held-out pairs (its training corpus is not available here)"


def run_to_file(model, tokenizer, gold, settings, out: str | os.PathLike, **kwargs) -> dict:
    """run_scorecard, then the result written atomically to `out` (nothing when cancelled; on a
    split, by the main process only)."""
    result = run_scorecard(model, tokenizer, gold, settings, **kwargs)
    if kwargs.get("split", ONE).is_main:
        write_json_atomic(Path(out), result)
    return result


RESULT_KEYS = ("rows", "grid", "gold")


def read_result(path: str | os.PathLike) -> dict | None:
    """The scorecard's result as run_to_file wrote it, or None when missing or damaged (computed again)."""
    return read_json_object(Path(path), RESULT_KEYS)
