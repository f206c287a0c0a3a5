"""ALTI+ over a test set as one job: per sentence the tokens, each output token's source share and the
rolled-out contributions, with a summary; written as one JSON file, whole or not at all.

The sentences are a checkpoint's held-out pairs or a TSV the user names, teacher-forced on the reference
or on the model's own greedy output (explorer.studies.common.sentences builds both, as the head lab does).
Cancellable through a progress callback or an event (explorer.runtime.progress), like the head lab, so
a page can run it in the background; a cancelled job writes nothing.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from explorer.evaluation.arguments import check_ranges
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.studies.common.sentences import FORCED, build_sentences
from explorer.studies.contributions.sentence import SentenceContributions, sentence_contributions
from explorer.evaluation.scores import MAX_HELD_OUT

# What a run may ask for, checked by ContributionSettings and by `python -m explorer contributions` as it
# parses: a whole shipped test set (MAX_HELD_OUT) at most; each sentence is one teacher-forced pass
# and its JSON grows with target x (source + target) numbers, ~25 MB for 1000 verses.
RANGES = {"sentences": (1, MAX_HELD_OUT)}
DIGITS = 5                               # decimals kept in the JSON (contributions are shares in [0, 1])
PERCENTILES = (5, 25, 50, 75, 95)


@dataclass(frozen=True)
class ContributionSettings:
    sentences: int = 200             # the first N pairs
    forced: str = "reference"        # teacher-force the reference or the model's own greedy output
    per_layer: bool = False          # also each layer's encoder / decoder-self / cross matrices

    def __post_init__(self) -> None:
        if self.forced not in FORCED:
            raise ValueError(f"forced must be one of {FORCED}, not {self.forced!r}")
        check_ranges(self, RANGES)


def rounded(m: np.ndarray) -> list:
    return np.round(np.asarray(m, dtype=np.float64), DIGITS).tolist()


def pieces(tokenizer, ids: list[int], side: str) -> list[str]:
    return [tokenizer.id_to_piece(int(i), side=side) for i in ids]


def sentence_entry(tokenizer, sc: SentenceContributions, per_layer: bool) -> dict:
    """One sentence as JSON-ready data; `contributions` rows are output tokens, columns the source
    tokens then the decoder's inputs (its start token, then the forced output before it)."""
    decoder_inputs = ["<start>"] + pieces(tokenizer, sc.out_ids[:-1], "tgt")
    entry = {
        "src_tokens": pieces(tokenizer, sc.src_ids, "src"),
        "tgt_tokens": pieces(tokenizer, sc.out_ids, "tgt"),
        "decoder_inputs": decoder_inputs,
        "source_share": rounded(sc.source_share),
        "mean_source_share": round(float(sc.source_share.mean()), DIGITS),
        "token_logprobs": [round(float(x), DIGITS) for x in sc.token_logprobs],
        "contributions": rounded(sc.rollout[-1]),
    }
    if sc.fallback_rows:
        entry["fallback_rows"] = sc.fallback_rows
    if per_layer:
        entry["layers"] = {"encoder": rounded(sc.encoder), "decoder_self": rounded(sc.decoder_self),
                           "cross": rounded(sc.cross), "cross_attention": rounded(sc.cross_attention)}
    return entry


def summary(shares: list[np.ndarray]) -> dict:
    """Source shares over every output token of the set: their mean, the sentences' mean, percentiles
    (the 5th is a calibration point for "this word owes little to the source")."""
    every = np.concatenate(shares)
    return {"tokens": int(every.size), "mean_source_share": round(float(every.mean()), DIGITS),
            "mean_of_sentence_means": round(float(np.mean([s.mean() for s in shares])), DIGITS),
            "percentiles": {str(q): round(float(np.percentile(every, q)), DIGITS) for q in PERCENTILES},
            "share_at_first_token": round(float(np.mean([s[0] for s in shares])), DIGITS),
            "share_at_eos": round(float(np.mean([s[-1] for s in shares])), DIGITS)}


def run_contributions(model, tokenizer, pairs, settings: ContributionSettings, *,
                      context: RunContext = RunContext()) -> dict:
    """Every sentence's contributions and the summary, as plain JSON-ready data. Raises Cancelled."""
    t0 = time.time()
    ticker = context.ticker()
    sents = build_sentences(model, tokenizer, pairs, settings.sentences, settings.forced)
    tick = ticker.stage("contributions", len(sents))
    entries, shares, fallbacks = [], [], 0
    texts = list(pairs)[:len(sents)]
    for i in range(len(sents)):
        sc = sentence_contributions(model, sents.src[i], sents.out[i])
        entry = sentence_entry(tokenizer, sc, settings.per_layer)
        entries.append({"index": i, "source": texts[i].src, "reference": sents.refs[i], **entry})
        shares.append(sc.source_share)
        fallbacks += sc.fallback_rows
        ticker.check(tick, i + 1)
    context.say(f"{len(entries)} sentences in {time.time() - t0:.1f} s")
    return {"settings": {**context.checkpoint(), "method": "ALTI+ (L1, clipped, rows normalised; rolled out)", **asdict(settings),
                         "sentences": len(entries)},
            "summary": {**summary(shares), "fallback_rows": fallbacks},
            "sentences": entries, "seconds": round(time.time() - t0, 1)}


def report(result: dict) -> str:
    """The summary as a few lines for the command line."""
    s = result["summary"]
    settings = result["settings"]
    pct = ", ".join(f"p{q} {v:.3f}" for q, v in s["percentiles"].items())
    return "\n".join([
        f"ALTI+ source share over {settings['sentences']} sentences ({s['tokens']} output tokens, forced on "
        f"the {settings['forced']}):",
        f"  mean {s['mean_source_share']:.3f} (mean of sentence means {s['mean_of_sentence_means']:.3f}); {pct}",
        f"  first output token {s['share_at_first_token']:.3f}, EOS {s['share_at_eos']:.3f}"
        + (f"; {s['fallback_rows']} rows with nothing left after the clip" if s["fallback_rows"] else "")])


CONTRIBUTIONS = Study("contributions", run_contributions, ("settings", "summary", "sentences"), report,
                      ("contributions",))
