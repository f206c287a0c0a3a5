"""The scorecard as a study: its training corpus for eflomal, and the Study the command line and the
app's background job both run (explorer.studies.common.result: a result on disk is always whole, and a
cancelled run leaves no file).
"""
from __future__ import annotations

from typing import Sequence

from explorer.studies.align.report import report
from explorer.studies.align.scorecard import STAGES, run_scorecard
from explorer.studies.common.result import Study
from explorer.data import DataError, load_corpus


def training_pairs(meta: dict, held_out: Sequence) -> tuple[Sequence, str]:
    """What eflomal learns from besides the gold pairs: the checkpoint's training corpus when it can
    be loaded or built here (numbers: always; bible: with the SWORD packages), else the held-out pairs."""
    dataset = (meta.get("training") or {}).get("dataset")
    if dataset:
        try:
            corpus = load_corpus(dataset)
            return corpus.train, f"the {dataset} training corpus"
        except (DataError, OSError, ValueError):
            pass
    return list(held_out), "the checkpoint's held-out pairs (its training corpus is not available here)"


RESULT_KEYS = ("settings", "rows", "grid", "gold")
SCORECARD = Study("align", run_scorecard, RESULT_KEYS, report, STAGES)
