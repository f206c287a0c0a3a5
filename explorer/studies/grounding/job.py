"""Grounded or guessing over a file of sentences, as a study: each sentence's translation and the verdict
the Translate page shows (verdict.py), written as one JSON file whole or not at all.

The result: `{"checkpoint", "weights_sha256", "index": {dataset, pairs, threshold, calibration},
"sentences": [{"output", "source", "guessing", "score", "threshold", "other_language", "summary",
"words": [...]}]}`; the index (index.py) is the checkpoint's own, built once beside it (build.ensure).
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.decoding.translate import DecodeConfig, translate
from explorer.evaluation.arguments import check_ranges
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.grounding.index import TrainingIndex
from explorer.studies.grounding.verdict import verdict

RANGES = {"beam": (1, 10)}
RESULT_KEYS = ("index", "sentences")


@dataclass(frozen=True)
class GroundingSettings:
    beam: int = 5                    # the translations' beam size, as the app's default

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)


def run_grounding(model, tokenizer, sources: list[str], settings: GroundingSettings, *, index: TrainingIndex,
                  name: str, context: RunContext = RunContext()) -> dict:
    """Each source translated and judged against the training data's index (JSON-ready); `name` is
    the checkpoint's, as the verdict quotes it."""
    cfg = DecodeConfig(beam_size=settings.beam)
    tick = context.ticker().stage("sentences", len(sources))
    rows = []
    for k, source in enumerate(sources):
        output = translate(model, tokenizer, source, cfg).text
        rows.append({"output": output, **verdict(index, source, name, output).to_json()})
        tick(k + 1)
    return {"checkpoint": name, "weights_sha256": context.meta.get("weights_sha256"),
            "index": {"dataset": index.dataset, "pairs": index.pairs, "threshold": index.threshold,
                      "calibration": index.calibration},
            "sentences": rows}


def report(result: dict) -> str:
    rows = result["sentences"]
    guesses = sum(bool(r["guessing"]) for r in rows)
    return f"{guesses} of {len(rows)} sentences called guesses (threshold {result['index']['threshold']})"


GROUNDING = Study("grounding", run_grounding, RESULT_KEYS, report, ("sentences",))
