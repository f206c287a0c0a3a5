"""The beam-size curve over a test set: what a wider beam buys under the model and against references.

Koehn & Knowles 2017 ("Six Challenges for Neural Machine Translation", WNMT) saw BLEU fall as the beam
grows (the beam-search curse); Stahlberg & Byrne 2019 showed why: the model's own best output is often
short or empty, and a wider beam finds outputs the model scores higher and people like less. Each row
here is one (length penalty, beam size) setting decoded over the whole set, with
* bleu, chrf: corpus scores (explorer.evaluation.scores.corpus_scores, sacrebleu's defaults);
* length_ratio: output words / reference words over the set (whitespace words, detokenized text);
* mean_score: the mean cumulative log-prob of the outputs under the model; mean_normalized: divided by
  the length penalty (what the search ranks by);
* higher_score_worse_chrf: the share of sentences where this beam's output scores higher (by the search's
  objective) than the next smaller beam's and has a lower sentence chrF: search "improved", the
  translation got worse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from explorer.config import DecodeConfig
from explorer.studies.contrastive.compact_beam import compact_beam_search
from explorer.decoding.core import Hypothesis
from explorer.decoding.translate import decode
from explorer.evaluation.scores import corpus_scores
from explorer.runtime.forked import imap, usable_workers
from explorer.runtime.split import ONE, Split

BEAMS = (1, 2, 4, 8, 16, 32)
# Outputs cut at 1.5 x source + 10 tokens (as the head lab's and the lenses' decodes): a wide beam that
# babbles stops there, and the exact search's space is bounded by the same rule.
MAX_LEN_A, MAX_LEN_B = 1.5, 10
MAX_WORKERS = 2                      # the curve's goal is for 2 cores; more would share them
ROWS_PER_BATCH = 256                 # beam rows decoded at once: sentences per batch = this // beam


@dataclass(frozen=True)
class Penalty:
    """A length-penalty setting of the curve: "none" (the log-prob itself) or "gnmt" with its alpha."""

    kind: str = "none"
    alpha: float = 0.0

    @property
    def label(self) -> str:
        return "none" if self.kind == "none" else f"{self.kind}:{self.alpha:g}"

    @classmethod
    def parse(cls, text: str) -> "Penalty":
        """"none", "average", "gnmt" (alpha 0.6, the project's default) or "gnmt:ALPHA"."""
        kind, _, alpha = text.strip().partition(":")
        if kind not in ("none", "average", "gnmt"):
            raise ValueError(f"a length penalty is none, average, gnmt or gnmt:ALPHA, not {text[:40]!r}")
        if kind != "gnmt":
            if alpha:
                raise ValueError(f"only gnmt takes an alpha, not {text[:40]!r}")
            return cls(kind, 0.0)
        try:
            value = float(alpha) if alpha else 0.6
        except ValueError:
            raise ValueError(f"gnmt's alpha must be a number, not {alpha[:40]!r}") from None
        if not 0.0 <= value <= 5.0:
            raise ValueError(f"gnmt's alpha must be in [0, 5], not {value}")
        return cls(kind, value)


def beam_config(beam: int, penalty: Penalty) -> DecodeConfig:
    return DecodeConfig(strategy="beam", beam_size=beam, n_best=1, length_penalty=penalty.kind,
                        alpha=penalty.alpha if penalty.kind == "gnmt" else 0.6, max_len_a=MAX_LEN_A,
                        max_len_b=MAX_LEN_B)


def length_batches(src: Sequence[Sequence[int]], cfg: DecodeConfig) -> list[list[int]]:
    """The sources' indices in batches of similar lengths (shortest first), ROWS_PER_BATCH beam rows each."""
    per_batch = max(1, ROWS_PER_BATCH // cfg.beam_size)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    return [order[first:first + per_batch] for first in range(0, len(order), per_batch)]


def library_decode_set(model, src: Sequence[Sequence[int]], cfg: DecodeConfig, *,
                       given: Sequence[int] = ()) -> list[Hypothesis]:
    """decode_set's reference: the library's own search (explorer.decoding.translate.decode) on the same
    batches, in turn, in one process; what the curve decoded before compact beam search and the workers,
    kept so the tests and `python -m benchmarks search_curve` compare the two."""
    out: list[Hypothesis | None] = [None] * len(src)
    for idx in length_batches(src, cfg):
        for i, d in zip(idx, decode(model, [list(src[i]) for i in idx], cfg, given=given)):
            out[i] = d.best
    return out


def decode_set(model, src: Sequence[Sequence[int]], cfg: DecodeConfig,
               tick: Callable[[int], None] = lambda _: None, *, workers: int | None = None,
               split: Split = ONE, given: Sequence[int] = ()) -> list[Hypothesis]:
    """The best hypothesis of every source, in input order; batches of similar lengths, ROWS_PER_BATCH
    beam rows each; tick(done) after each batch (it raises to cancel).

    Beam search runs as explorer.studies.contrastive.compact_beam (finished sentences leave the decoder's batch)
    and the batches over `workers` forked processes (explorer.runtime.forked; None: as many as are safe
    and useful, at most MAX_WORKERS; the costliest first, so the last to end are short): the same batches as one process decoding them in turn with the library's beam
    search, so the same hypotheses and scores (tests/unit/test_contrastive_curve_speed.py). Under torchrun
    each process decodes every world-th batch (explorer.runtime.split) and all get every hypothesis.
    `given`: the tokens every output starts with (a multilingual model's target tag: translate.forced_target)."""
    batches = length_batches(src, cfg)
    out: list[Hypothesis | None] = [None] * len(src)
    finished = [0]
    mine = list(split.mine(len(batches)))
    own: dict[int, list[Hypothesis]] = {}

    def run(idx: Sequence[int]) -> list[Hypothesis]:
        rows = [list(src[i]) for i in idx]
        found = (compact_beam_search(model, rows, cfg, given=given) if cfg.strategy == "beam"
                 else decode(model, rows, cfg, given=given))
        return [d.best for d in found]

    if workers is None:
        workers = usable_workers(model, len(mine), MAX_WORKERS)
    results = imap(run, [(batches[b],) for b in mine], workers, ordered=False, order=range(len(mine) - 1, -1, -1))
    try:
        for k, hyps in results:
            own[mine[k]] = hyps
            finished[0] += len(hyps)
            tick(min(len(src), finished[0] * split.world))   # it raises to cancel
    finally:
        results.close()                                      # a cancelled curve ends its workers
    for idx, hyps in zip(batches, split.gather(own, len(batches))):
        for i, h in zip(idx, hyps):
            out[i] = h
    return out


def sentence_chrf(hyps: Sequence[str], refs: Sequence[str]) -> list[float]:
    """chrF of each sentence on its own (corpus chrF of one sentence)."""
    return [corpus_scores([h], [r])["chrf"] for h, r in zip(hyps, refs)]


def curve_row(beam: int, penalty: Penalty, hyps: list[Hypothesis], texts: list[str], refs: list[str],
              chrfs: list[float], smaller: tuple[list[Hypothesis], list[float]] | None) -> dict:
    """One row of the curve (module docstring); `smaller`: the next smaller beam's (hypotheses, chrFs)."""
    scores = corpus_scores(texts, refs)
    words = sum(len(t.split()) for t in texts)
    ref_words = max(sum(len(r.split()) for r in refs), 1)
    row = {"beam": beam, "length_penalty": penalty.label, "bleu": round(scores["bleu"], 4),
           "chrf": round(scores["chrf"], 4), "length_ratio": round(words / ref_words, 4),
           "mean_score": round(sum(h.score for h in hyps) / len(hyps), 4),
           "mean_normalized": round(sum(h.normalized for h in hyps) / len(hyps), 4),
           "empty": sum(not h.output_ids for h in hyps) / len(hyps),
           "higher_score_worse_chrf": None, "search_errors": None}
    if smaller is not None:
        before, before_chrf = smaller
        worse = sum(h.normalized > b.normalized + 1e-4 and c < bc
                    for h, b, c, bc in zip(hyps, before, chrfs, before_chrf))
        row["higher_score_worse_chrf"] = round(worse / len(hyps), 4)
    return row
