"""The search analysis over a test set as one job: the beam-size curve for each length penalty and,
with exact search, the search-error rate per beam size and the empty/short check, written as one JSON.

Search errors (Stahlberg & Byrne 2019): a beam's output is a search error when the exact search found
another output the model scores higher (by the log-prob, length penalty "none": the objective the exact
search proves). The rate per beam size is over the sentences where the exact search was proven within its
budget; where it was not, a beam whose output the search beat is still a known error, counted apart
(`search_errors_known`). Empty/short: the exact best is empty, or shorter than half the widest beam's
output (both with no length penalty). The job reports progress and can be cancelled
(explorer.runtime.progress); the file is written once at the end (explorer.studies.common.result): whole or
not at all.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

from explorer.studies.contrastive.curve import BEAMS, Penalty, beam_config, curve_row, decode_set, sentence_chrf
from explorer.studies.contrastive.exact import TOLERANCE, exact_search
from explorer.decoding.core import check_config
from explorer.decoding.translate import forced_target
from explorer.runtime.progress import Ticker
from explorer.runtime.split import ONE, Split
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.common.sentences import build_sentences

# What a run may ask for, checked by SearchSettings and while `python -m explorer search` parses: a
# whole shipped test set (1002 Bible verses), beams up to decoding's MAX_BEAM, an exact search budget
# per sentence up to a million decoder steps or an hour.
RANGES = {"sentences": (1, 5000), "beam": (1, 64), "exact_sentences": (0, 5000), "exact_nodes": (1, 1_000_000),
          "exact_seconds": (1, 3600)}
RESULT_KEYS = ("settings", "beam_curve", "exact")
EXACT_STAGE = "exact search"


@dataclass(frozen=True)
class SearchSettings:
    beams: tuple[int, ...] = BEAMS
    sentences: int = 200                  # the first N held-out pairs
    penalties: tuple[str, ...] = ("none", "gnmt:0.6")
    exact: bool = False
    exact_sentences: int = 0              # exact search on the first N of them (0: all)
    exact_nodes: int = 20_000             # per sentence: decoder steps
    exact_seconds: int = 20               # per sentence
    parsed: tuple[Penalty, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.beams or len(set(self.beams)) != len(self.beams):
            raise ValueError(f"beams must be distinct sizes, not {list(self.beams)}")
        for name, values in (("beam", self.beams), ("sentences", [self.sentences]),
                             ("exact_sentences", [self.exact_sentences]), ("exact_nodes", [self.exact_nodes]),
                             ("exact_seconds", [self.exact_seconds])):
            low, high = RANGES[name]
            for value in values:
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                    raise ValueError(f"{name} >= {low} and <= {high} required, not {value!r}")
        parsed = tuple(Penalty.parse(p) for p in self.penalties)
        if not parsed or len({p.label for p in parsed}) != len(parsed):
            raise ValueError(f"length penalties must be distinct, not {list(self.penalties)}")
        if self.exact and "none" not in {p.label for p in parsed}:
            parsed = (Penalty(),) + parsed                     # search errors are counted without a penalty
        object.__setattr__(self, "beams", tuple(sorted(self.beams)))
        object.__setattr__(self, "parsed", parsed)


def curve_stage(beam: int, penalty: Penalty) -> str:
    return f"beam {beam}, length penalty {penalty.label}"


def stage_names(settings: SearchSettings) -> tuple[str, ...]:
    """The progress stages run_search reports, in order (the app's progress bar counts them)."""
    names = tuple(curve_stage(beam, penalty) for penalty in settings.parsed for beam in settings.beams)
    return names + (EXACT_STAGE,) if settings.exact else names


def run_search(model, tokenizer, pairs, settings: SearchSettings, *, context: RunContext = RunContext()) -> dict:
    """The beam curve (and with settings.exact the per-sentence exact search) as JSON-ready data; under
    torchrun split over its processes (explorer.runtime.split: batches, then exact-search sentences)."""
    split, log = context.split, context.say
    for beam in settings.beams:                  # every size this model allows, before anything is decoded
        check_config(beam_config(beam, Penalty()), model, beam=True)
    t0 = time.time()
    ticker = context.ticker()
    sents = build_sentences(model, tokenizer, pairs, settings.sentences, "reference")
    given = forced_target(tokenizer)               # a multilingual model's target tag, on every output
    rows, kept = [], {}
    for penalty in settings.parsed:
        smaller = None
        for beam in settings.beams:
            t1 = time.time()
            tick = ticker.stage(curve_stage(beam, penalty), len(sents))
            hyps = decode_set(model, sents.src, beam_config(beam, penalty), lambda done: ticker.check(tick, done),
                              split=split, given=given)
            texts = [tokenizer.decode(h.output_ids, side="tgt") for h in hyps]
            chrfs = sentence_chrf(texts, sents.refs)
            row = curve_row(beam, penalty, hyps, texts, sents.refs, chrfs, smaller)
            row["seconds"] = round(time.time() - t1, 1)
            rows.append({**row, "translations": texts})
            kept[(penalty.label, beam)] = hyps
            smaller = (hyps, chrfs)
            log(f"beam {beam:2d} {penalty.label:8s} BLEU {row['bleu']:6.2f} chrF {row['chrf']:6.2f} "
                f"ratio {row['length_ratio']:.3f} mean score {row['mean_score']:.3f} ({row['seconds']} s)")
    exact = (_exact_part(model, sents, settings, kept, ticker, context.stopped, log, split, given)
             if settings.exact else [])
    if exact:
        _search_errors(rows, exact, settings)
    return {
        "settings": {**context.checkpoint(), **{k: v for k, v in asdict(settings).items() if k != "parsed"}, "sentences": len(sents),
                     "decoding": {k: beam_config(1, Penalty()).to_dict()[k] for k in ("max_len_a", "max_len_b")}},
        "beam_curve": rows,
        "exact": exact,
        "exact_summary": _exact_summary(exact),
        "references": sents.refs,
        "seconds": round(time.time() - t0, 1),
        "processes": split.world,
    }


def _exact_part(model, sents, settings: SearchSettings, kept: dict, ticker: Ticker, stop, log,
                split: Split = ONE, given: Sequence[int] = ()) -> list[dict]:
    """Exact search per sentence, its bound started at the best-scoring output of any beam; under torchrun
    each process searches every world-th sentence. `given`: the tokens every output starts with (the
    beams' too); lengths, empty and short count the translation after them."""
    n = settings.exact_sentences or len(sents)
    n = min(n, len(sents))
    widest = max(settings.beams)
    cfg = beam_config(1, Penalty())
    tick = ticker.stage(EXACT_STAGE, n)
    own: dict[int, dict] = {}
    for i in split.mine(n):
        start = max((hyps[i] for hyps in kept.values()), key=lambda h: h.score)
        found = exact_search(model, sents.src[i], cfg, initial=start, max_nodes=settings.exact_nodes,
                             max_seconds=settings.exact_seconds, stop=stop, given=given)
        if found.stopped_by == "cancelled":
            ticker.check(lambda _: False, i)
        beam_out = kept[("none", widest)][i].output_ids[len(given):]
        words = found.output_ids[len(given):]
        own[i] = {"index": i, "proven": found.proven, "score": round(found.score, 5),
                  "length": len(words), "finished": found.finished,
                  "empty": not words, "short": len(words) < 0.5 * len(beam_out),
                  "beam_length": len(beam_out), "nodes": found.nodes, "seconds": round(found.seconds, 2),
                  "stopped_by": found.stopped_by, "ids": found.output_ids,
                  "beam_scores": {str(b): round(kept[("none", b)][i].score, 5) for b in settings.beams},
                  "beam_ids_equal": {str(b): kept[("none", b)][i].ids == found.ids for b in settings.beams}}
        ticker.check(tick, min(n, len(own) * split.world))
    out = split.gather(own, n)
    proven = sum(e["proven"] for e in out)
    log(f"exact search: proven on {proven} of {len(out)} sentences")
    return out


def _search_errors(rows: list[dict], exact: list[dict], settings: SearchSettings) -> None:
    """search_errors on each no-penalty row: over proven sentences, the share whose beam output scores
    below the exact best (another output, TOLERANCE apart); search_errors_known: over all searched."""
    proven = [e for e in exact if e["proven"]]
    for row in rows:
        if row["length_penalty"] != "none":
            continue
        beam = str(row["beam"])

        def error(e: dict) -> bool:
            return not e["beam_ids_equal"][beam] and e["beam_scores"][beam] < e["score"] - TOLERANCE
        row["search_errors"] = round(sum(map(error, proven)) / len(proven), 4) if proven else None
        row["search_errors_known"] = round(sum(map(error, exact)) / len(exact), 4)
        row["exact_proven"] = len(proven)


def _exact_summary(exact: list[dict]) -> dict:
    if not exact:
        return {}
    proven = [e for e in exact if e["proven"]]
    share = (lambda key, rows: round(sum(e[key] for e in rows) / len(rows), 4) if rows else None)
    return {"searched": len(exact), "proven": len(proven), "empty_proven": share("empty", proven),
            "short_proven": share("short", proven), "empty_all": share("empty", exact), "short_all": share("short", exact),
            "median_nodes": sorted(e["nodes"] for e in exact)[len(exact) // 2]}


def report(result: dict) -> str:
    """The curve and the exact search's summary as text (what the command prints)."""
    s = result["settings"]
    lines = [f"beam-size curve over {s['sentences']} sentences",
             f"  {'penalty':9s} {'beam':>4s} {'BLEU':>7s} {'chrF':>7s} {'ratio':>6s} {'score':>8s} "
             f"{'worse':>6s} {'s.err':>6s}"]
    for r in result["beam_curve"]:
        worse = "" if r["higher_score_worse_chrf"] is None else f"{r['higher_score_worse_chrf']:.3f}"
        errors = "" if r["search_errors"] is None else f"{r['search_errors']:.3f}"
        lines.append(f"  {r['length_penalty']:9s} {r['beam']:4d} {r['bleu']:7.2f} {r['chrf']:7.2f} "
                     f"{r['length_ratio']:6.3f} {r['mean_score']:8.3f} {worse:>6s} {errors:>6s}")
    lines.append("  worse: share where this beam scores higher than the smaller one and has lower chrF; "
                 "s.err: search errors (proven sentences)")
    summary = result.get("exact_summary") or {}
    if summary:
        lines.append(f"exact search: proven on {summary['proven']} of {summary['searched']} sentences; "
                     f"exact best empty {summary['empty_proven']}, shorter than half the widest beam's output "
                     f"{summary['short_proven']} (shares of the proven)")
    return "\n".join(lines)


BEAM_CURVE = Study("search", run_search, RESULT_KEYS, report)     # stages: stage_names(settings)
