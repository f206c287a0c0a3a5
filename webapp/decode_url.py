"""The decoding settings in the URL, so that a shared link decodes the way its sender did.

Before this, a link carried the sentence but not the strategy, and every page fell back to beam
search: a teacher's greedy example reopened as beam search. Here each setting the Translate page
offers has a short URL key and the range its widget accepts (decode_form draws its widgets with
these ranges). A URL value is untrusted: a number outside its widget's range is clamped into it
(beam=100000 is the largest beam offered; every page writes the settings it decodes with back,
lecture.run), one of the wrong type falls back to the default for that setting alone, never to an
error (a slider given a value outside its range would raise). Only the settings of the chosen
strategy are written, so a greedy link stays short.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from explorer.config import DecodeConfig
from explorer.config.checks import MAX_BEAM, MAX_DECODE_LEN
from webapp.url_keys import UrlKey, integer

BEAM_CAP = min(16, MAX_BEAM)     # the Translate page's cap on beam size and n-best (below MAX_BEAM: past
                                 # 16 a beam rarely changes the translation, and the tables grow with it)
ALPHA_CAP = 2.0                  # the GNMT exponent's slider (DecodeConfig allows 5; 0.6-1.0 is usual)
PENALTIES = ("gnmt", "average", "none")
STRATEGIES = ("greedy", "beam", "sample")
SAMPLES_CAP = 10
DEFAULT_SAMPLES = 3
TRACE_TOP_K = 8                  # alternatives a BeamTrace keeps per hypothesis: the Beam page's step table
# The app's starting settings. Their trace width is the Beam page's, so the Beam page reuses the
# translation the Translate and Attention pages made (one decode per student, not two: under a class's
# load the second one was 12% of the server's CPU).
DEFAULTS = DecodeConfig(strategy="beam", beam_size=5, n_best=5, trace_top_k=TRACE_TOP_K).to_dict()


@dataclass(frozen=True)
class Setting(UrlKey):
    """One decoding setting: a URL key (webapp.url_keys: its type and range) and its DecodeConfig field
    (or "samples"); parse() clamps a number into the widget's range, None for a malformed value."""
    field: str = ""
    strategies: tuple = STRATEGIES          # written to the URL only for these strategies


SETTINGS = (
    Setting("dec", str, choices=STRATEGIES, field="strategy"),
    Setting("beam", integer, 1, BEAM_CAP, field="beam_size", strategies=("beam",)),
    Setting("nbest", integer, 1, BEAM_CAP, field="n_best", strategies=("beam",)),
    Setting("lp", str, choices=PENALTIES, field="length_penalty", strategies=("beam",)),
    Setting("alpha", float, 0.0, ALPHA_CAP, field="alpha", strategies=("beam",)),
    Setting("temp", float, 0.1, 2.0, field="temperature", strategies=("sample",)),
    Setting("topk", integer, 0, 1000, field="top_k", strategies=("sample",)),
    Setting("topp", float, 0.05, 1.0, field="top_p", strategies=("sample",)),
    Setting("seed", integer, 0, 2**31 - 1, field="seed", strategies=("sample",)),
    Setting("samples", integer, 1, SAMPLES_CAP, field="samples", strategies=("sample",)),
    Setting("minlen", integer, 0, MAX_DECODE_LEN, field="min_len"),
    Setting("maxlen", integer, 1, MAX_DECODE_LEN, field="max_len_b"),
)
BY_FIELD = {s.field: s for s in SETTINGS}
KEYS = tuple(s.key for s in SETTINGS)


def from_query(query: Mapping[str, Any]) -> tuple[dict, int]:
    """(DecodeConfig dict, samples) from URL parameters: each setting the URL names validly, the
    app's defaults for the rest."""
    cfg, samples = dict(DEFAULTS), DEFAULT_SAMPLES
    for setting in SETTINGS:
        value = setting.parse(query[setting.key]) if setting.key in query else None
        if value is None:
            continue
        if setting.field == "samples":
            samples = value
        else:
            cfg[setting.field] = value
    try:
        cfg = DecodeConfig(**cfg).to_dict()
    except (TypeError, ValueError):                   # settings valid alone but not together
        cfg = dict(DEFAULTS)
    return cfg, samples


def to_query(cfg: Mapping[str, Any], samples: int) -> dict[str, str | None]:
    """The URL parameters for these settings: the chosen strategy's settings, and the length limits
    where they differ from the defaults; None (remove the key) for the rest."""
    values = dict(cfg, samples=samples)
    out: dict[str, str | None] = {}
    for setting in SETTINGS:
        value = values.get(setting.field)
        wanted = cfg.get("strategy") in setting.strategies
        if setting.field in ("min_len", "max_len_b"):
            wanted = value != DEFAULTS[setting.field]
        out[setting.key] = UrlKey.text(value) if wanted and value is not None else None
    return out

