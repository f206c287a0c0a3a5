"""Grounded or guessing over a file of sentences, as a study: each sentence's translation and the verdict
the Translate page shows (verdict.py), written as one JSON file whole or not at all.

The result: `{"checkpoint", "weights_sha256", "index": {dataset, pairs, threshold, calibration},
"states": the encoder-state map's calibration or null, "sentences": [{"output", "source", "guessing", "partly",
"unknown", "score", "distance", "combined", "threshold", "threshold_of" (which of score and combined the threshold
is for: combined when the map was used), "other_language", "summary", "words": [...]}]}`; the index (index.py)
is the checkpoint's own, built once beside it (build.ensure), and so is its encoder-state map
(build.ensure_states: the shipped one, or one encoder pass over the training sentences, kept).
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.decoding.translate import DecodeConfig, translate
from explorer.evaluation.arguments import check_ranges
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.grounding import states
from explorer.studies.grounding.index import TrainingIndex
from explorer.studies.grounding.states import StateMap
from explorer.studies.grounding.verdict import verdict

RANGES = {"beam": (1, 10)}
RESULT_KEYS = ("index", "sentences")


@dataclass(frozen=True)
class GroundingSettings:
    beam: int = 5                    # the translations' beam size, as the app's default

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)


def run_grounding(model, tokenizer, sources: list[str], settings: GroundingSettings, *, index: TrainingIndex,
                  name: str, state_map: StateMap | None = None, context: RunContext = RunContext()) -> dict:
    """Each source translated and judged against the training data's index and, when given, the
    checkpoint's encoder-state map (JSON-ready); `name` is the checkpoint's, as the verdict quotes it."""
    cfg = DecodeConfig(beam_size=settings.beam)
    tick = context.ticker().stage("sentences", len(sources))
    rows = []
    for k, source in enumerate(sources):
        output = translate(model, tokenizer, source, cfg).text
        distance = None if state_map is None else \
            states.distance(state_map, states.source_states(model, tokenizer, [source])[0])
        found = verdict(index, source, name, output, distance, state_map.calibration if state_map else None)
        rows.append({"output": output, **found.to_json()})
        tick(k + 1)
    return {"checkpoint": name, "weights_sha256": context.meta.get("weights_sha256"),
            "index": {"dataset": index.dataset, "pairs": index.pairs, "threshold": index.threshold,
                      "calibration": index.calibration},
            "states": None if state_map is None else state_map.calibration,
            "sentences": rows}


def report(result: dict) -> str:
    rows = result["sentences"]
    guesses = sum(bool(r["guessing"]) for r in rows)
    partly = sum(bool(r.get("partly")) for r in rows)
    called = f"{guesses} of {len(rows)} sentences called guesses, {partly} partly"
    both = result.get("states") or {}
    if "threshold" in both:            # the verdict combined both signals: its threshold is the map's
        return (f"{called} (threshold {both['threshold']} on the training words and the encoder states combined; "
                f"the words alone: {result['index']['threshold']})")
    return f"{called} (threshold {result['index']['threshold']})"


GROUNDING = Study("grounding", run_grounding, RESULT_KEYS, report, ("sentences",))
