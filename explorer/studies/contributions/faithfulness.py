"""Is an explanation faithful? Remove the source tokens it ranks highest and see whether the model notices.

For every forced output token t and every explanation (a score per source token for that t), as in ERASER
(DeYoung et al., "ERASER: A Benchmark to Evaluate Rationalized NLP Models", ACL 2020) and its version for
generation (Zhao & Aletras, "Incorporating Attribution Importance for Improving Faithfulness Metrics",
ACL 2023), at each fraction f of the source (top-k, k = max(1, f n rounded, halves up) of the n source tokens before
EOS):
* comprehensiveness = log p(t | full source) - log p(t | source with the top k removed): high when the
  explanation found what the model used;
* sufficiency = log p(t | full source) - log p(t | source with only the top k kept): low when those
  tokens alone carry the prediction.
Removing a token means replacing it with the model's unknown-word id: the input keeps its length and
every other token keeps its position (deleting it would shift all later positions, and a zeroed
embedding is an input no model has seen, while rare words do reach the model as unk in training).
EOS is never removed. Each method is compared with random rankings (several seeds): a method beats
random when its comprehensiveness is higher and its sufficiency lower. Intervals: 95% bootstrap over
sentences (the sentence is the unit that was sampled), seeded.
One sentence, for the app (attribution_faithfulness): the same measures of the scores a page draws (any
ranking of the source, at the output positions it explains; a word's pieces removed together where the
scores are per word; a contrast log p(chosen) - log p(foil) as the function), beside the random orders.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from explorer.studies.contributions.sentence import sentence_contributions
from explorer.decoding.core import special_ids
from explorer.runtime.modes import eval_mode
from explorer.studies.common.context import RunContext
from explorer.studies.common.result import Study
from explorer.evaluation.arguments import check_ranges

FRACTIONS = (0.1, 0.2, 0.5)
METHODS = ("alti", "attention-mean", "attention-last-layer", "value-norm", "grad-x-input", "integrated-gradients")
RANGES = {"seeds": (1, 10), "ig_steps": (2, 128), "batch_rows": (1, 512)}
BOOTSTRAP = 1000


@dataclass(frozen=True)
class FaithfulnessSettings:
    methods: tuple[str, ...] = METHODS
    fractions: tuple[float, ...] = FRACTIONS
    seeds: int = 3                   # random rankings, the baseline
    ig_steps: int = 16
    batch_rows: int = 64             # edited sources per forward pass

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; choose from {METHODS}")
        if not self.fractions or any(not 0 < f <= 1 for f in self.fractions):
            raise ValueError("fractions must be in (0, 1]")
        check_ranges(self, RANGES)


def method_scores(model, src: list[int], out: list[int], methods: Sequence[str], ig_steps: int) -> dict[str, np.ndarray]:
    """Each method's score of every source token for every output token: [T, S], higher = more used."""
    from explorer.studies.align.attention import cross_weights, value_vectors, weighted_all
    from explorer.studies.align.pairs import ModelPair
    from explorer.studies.common.gradients import attributions

    found: dict[str, np.ndarray] = {}
    sc = sentence_contributions(model, src, out)
    found["alti"] = sc.rollout[-1][:, :len(src)]
    found["attention-mean"] = sc.cross_attention.mean(axis=0)
    found["attention-last-layer"] = sc.cross_attention[-1]
    pair = ModelPair(gold=None, src_ids=src, out_ids=out, src_groups=[], tgt_groups=[])
    if "value-norm" in methods:
        norms = np.linalg.norm(value_vectors(model, pair), axis=-1)                      # [L, H, S]
        found["value-norm"] = weighted_all(cross_weights(model, pair), norms)              # [T, S]
    for method in ("grad-x-input", "integrated-gradients"):
        if method in methods:                                                              # signed: support
            found[method] = attributions(model, src, out, method, ig_steps)
    return {m: np.asarray(found[m], dtype=np.float64) for m in methods}


def random_scores(src: Sequence[int], n_tgt: int, seed: int) -> np.ndarray:
    """A seeded random ranking [T, S] of one sentence (its ids salt the seed: each sentence its own draw)."""
    return np.random.default_rng([seed, *map(int, src)]).random((n_tgt, len(src)))         # [T, S]


def k_of(n_candidates: int, fraction: float) -> int:
    """How many of n_candidates a fraction removes or keeps: at least one, halves rounded up."""
    return max(1, int(fraction * n_candidates + 0.5))


def top_k(row: np.ndarray, n_candidates: int, fraction: float) -> list[int]:
    """The k best-scored of the first n_candidates source positions (ties: the earlier first)."""
    k = k_of(n_candidates, fraction)
    order = sorted(range(n_candidates), key=lambda j: (-row[j], j))
    return sorted(order[:k])


def edited(src: list[int], chosen: list[int], keep: bool, unk: int) -> tuple[int, ...]:
    """The source with `chosen` replaced by unk (keep=False) or with everything else but EOS replaced."""
    n = len(src) - 1                                                                       # EOS stays
    picked = set(chosen)
    return tuple((unk if ((j in picked) != keep) else t) if j < n else t for j, t in enumerate(src))


@torch.no_grad()
def forced_logprobs(model, sources: list[tuple[int, ...]], out: list[int], positions: list[int],
                    batch_rows: int) -> list[float]:
    """log p(out[positions[r]] | sources[r], out[:positions[r]]) per row, batched. A source that several
    rows share is encoded and decoded once (rows of one source differ only in the position read).
    Sources go in order of the last position they are read at, `batch_rows` per pass, and a pass decodes
    only up to its last position (later decoder inputs cannot change an earlier position's output);
    only the scored positions go through the output projection."""
    device = next(model.parameters()).device
    out_t = torch.tensor([out], dtype=torch.long, device=device)                          # [1, T]
    tgt_in = torch.cat([torch.full_like(out_t[:, :1], special_ids(model).start), out_t[:, :-1]], dim=1)  # [1, T]
    rows_of: dict[tuple[int, ...], list[int]] = {}
    for r, source in enumerate(sources):
        rows_of.setdefault(tuple(source), []).append(r)
    order = sorted(rows_of, key=lambda source: max(positions[r] for r in rows_of[source]))
    found = [0.0] * len(sources)
    with eval_mode(model):
        for first in range(0, len(order), batch_rows):
            part = order[first:first + batch_rows]
            src = torch.tensor(part, dtype=torch.long, device=device)                      # [B, S]
            memory, src_mask = model.encode(src)                                           # [B, S, d]
            rows = [r for source in part for r in rows_of[source]]
            which = torch.tensor([b for b, source in enumerate(part) for _ in rows_of[source]], device=device)  # [N]
            pos = torch.tensor([positions[r] for r in rows], dtype=torch.long, device=device)   # [N]
            hidden = model.decode(tgt_in[:, :int(pos.max()) + 1].expand(len(part), -1), memory, src_mask)  # [B, t, d]
            lp = model.generator(hidden[which, pos].unsqueeze(1))[:, 0]                    # [N, V]
            for r, value in zip(rows, lp.gather(1, out_t[0, pos].unsqueeze(1)).squeeze(1).tolist()):
                found[r] = value
    return found


def erasure_measures(model, src: list[int], out: list[int], rankings: dict[str, np.ndarray],
                     fractions: Sequence[float], batch_rows: int = 64, positions: Sequence[int] | None = None,
                     groups: Sequence[Sequence[int]] | None = None) -> dict:
    """{ranking: {"comprehensiveness": [F, P], "sufficiency": [F, P]}} for scores [T, U] per ranking, at the
    output `positions` (default every one: P = T). The candidates removed or kept are the source's units:
    by default each source token before EOS (the first S - 1 columns of a row [T, S] are read); `groups`
    makes each unit a list of source positions removed or kept together (a word's pieces), its score one
    column.
    An edited source that several rankings share is scored once."""
    unk, n = special_ids(model).unk, len(src) - 1
    positions = list(range(len(out))) if positions is None else [int(t) for t in positions]
    units = [[j] for j in range(n)] if groups is None else [list(g) for g in groups]
    full = forced_logprobs(model, [tuple(src)] * len(positions), out, positions, batch_rows)
    wanted: dict[tuple, int] = {}                      # (edited source, position) -> its row
    plan = {}
    for name, scores in rankings.items():
        for fi, f in enumerate(fractions):
            for t in positions:
                chosen = [j for u in top_k(scores[t], len(units), f) for j in units[u]] if units else []
                for keep in (False, True):
                    plan[(name, fi, t, keep)] = wanted.setdefault((edited(src, chosen, keep, unk), t), len(wanted))
    keys = list(wanted)
    lps = forced_logprobs(model, [k[0] for k in keys], out, [k[1] for k in keys], batch_rows)

    def drops(name: str, keep: bool) -> np.ndarray:
        return np.array([[full[i] - lps[plan[(name, fi, t, keep)]] for i, t in enumerate(positions)]
                         for fi in range(len(fractions))])                                   # [F, P]

    return {name: {"comprehensiveness": drops(name, False), "sufficiency": drops(name, True)} for name in rankings}


def sentence_faithfulness(model, src: list[int], out: list[int], settings: FaithfulnessSettings) -> dict:
    """erasure_measures of every method of `settings` and of its random rankings (random-<seed>)."""
    rankings = method_scores(model, src, out, settings.methods, settings.ig_steps)
    rankings.update({f"random-{s}": random_scores(src, len(out), s) for s in range(settings.seeds)})
    return erasure_measures(model, src, out, rankings, settings.fractions, settings.batch_rows)


PAGE = FaithfulnessSettings(methods=())    # one sentence on a page: the scores are given, fractions and seeds the defaults


def attribution_faithfulness(model, src: list[int], out: list[int], scores: dict[str, np.ndarray], *,
                             positions: Sequence[int] | None = None, groups: Sequence[Sequence[int]] | None = None,
                             foil: int | None = None, settings: FaithfulnessSettings = PAGE) -> dict:
    """How faithful the attributions a page draws are on its one sentence, as plain data.

    `scores`: {name: [T, U]} read as erasure_measures reads rankings, at its `positions` with its `groups`
    (a single row [U] stands for every position). For each, and for `settings.seeds` random rankings
    (the baseline), comprehensiveness and sufficiency averaged over `settings.fractions` and the
    positions: the sentence's own value in the scorecard's table; the baseline is the mean of the seeds'.
    With `foil` (one position t only) the function measured is the contrast log p(out[t]) - log p(foil)
    instead of log p(out[t]): each measure is out[t]'s minus the foil's under the same edits.
    Returns {"rankings": {name: {"comprehensiveness", "sufficiency"}}, "random": {"comprehensiveness",
    "sufficiency", "seeds": [each seed's]}, "fractions", "k" (the units removed or kept at each
    fraction), "units", "positions", "measured" ("log p" or "contrast")}."""
    if any(name.startswith("random-") for name in scores):
        raise ValueError("the random-<seed> names are the baseline's")
    positions = list(range(len(out))) if positions is None else [int(t) for t in positions]
    if not positions or not all(0 <= t < len(out) for t in positions):
        raise ValueError(f"positions must be output positions, 0 to {len(out) - 1}")
    units = len(src) - 1 if groups is None else len(groups)
    rankings: dict[str, np.ndarray] = {}
    for name, values in scores.items():
        values = np.asarray(values, dtype=np.float64)
        if values.ndim not in (1, 2) or values.shape[-1] < units or (values.ndim == 2 and len(values) != len(out)):
            raise ValueError(f"the scores of {name!r} ({values.shape}) do not cover {len(out)} output positions "
                             f"and {units} source units")
        rankings[name] = np.broadcast_to(values, (len(out), values.shape[-1])) if values.ndim == 1 else values
    rankings.update({f"random-{s}": random_scores(src, len(out), s) for s in range(settings.seeds)})

    def measured(target: list[int]) -> dict:
        return erasure_measures(model, src, target, rankings, settings.fractions, settings.batch_rows,
                                positions, groups)

    found = measured(list(out))
    if foil is not None:
        if len(positions) != 1:
            raise ValueError("a contrast with a foil is measured at one output position")
        t = positions[0]
        other = measured(list(out[:t]) + [int(foil)] + list(out[t + 1:]))
        found = {name: {m: v - other[name][m] for m, v in by.items()} for name, by in found.items()}
    means = {name: {m: float(v.mean()) for m, v in by.items()} for name, by in found.items()}
    seeds = [means[f"random-{s}"] for s in range(settings.seeds)]
    baseline = {m: float(np.mean([s[m] for s in seeds])) for m in ("comprehensiveness", "sufficiency")}
    return {"rankings": {name: means[name] for name in scores}, "random": {**baseline, "seeds": seeds},
            "fractions": list(settings.fractions), "k": [k_of(units, f) if units else 0 for f in settings.fractions],
            "units": units, "positions": positions, "measured": "contrast" if foil is not None else "log p"}


def interval(per_sentence: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """(mean, 2.5th, 97.5th percentile) of the mean over sentences, bootstrapped over sentences."""
    values = np.asarray(per_sentence, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (BOOTSTRAP, len(values)))].mean(axis=1)
    return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def table(per_sentence: list[dict], settings: FaithfulnessSettings) -> list[dict]:
    """One row per method and measure (averaged over fractions and tokens, per sentence first), and the
    random baseline: the mean over seeds with the spread of the seeds' means."""
    rows = []
    for measure in ("comprehensiveness", "sufficiency"):
        def values(name):
            return np.array([s[name][measure].mean() for s in per_sentence])              # [N]
        for name in settings.methods:
            mean, low, high = interval(values(name))
            by_fraction = {str(f): float(np.mean([s[name][measure][fi].mean() for s in per_sentence]))
                           for fi, f in enumerate(settings.fractions)}
            rows.append({"method": name, "measure": measure, "mean": mean, "ci95": [low, high],
                         "by_fraction": by_fraction})
        seeds = [values(f"random-{s}") for s in range(settings.seeds)]
        mean, low, high = interval(np.mean(seeds, axis=0))
        seed_means = [float(v.mean()) for v in seeds]
        rows.append({"method": "random", "measure": measure, "mean": mean, "ci95": [low, high],
                     "seed_means": seed_means, "seed_spread": float(np.std(seed_means))})
    return rows


def run_faithfulness(model, tokenizer, pairs, sentences: int, settings: FaithfulnessSettings, *,
                     context: RunContext = RunContext()) -> dict:
    """The scorecard over the first `sentences` pairs, forced on their references; under torchrun split
    over its processes (explorer.runtime.split: each takes every world-th sentence, the measures gathered
    in order, the same numbers as one process). Raises Cancelled."""
    from explorer.text.encoding import output_ids, source_ids

    t0, split = time.time(), context.split
    special, max_len = special_ids(model), model.cfg.max_len
    pairs = list(pairs)[:sentences]
    ticker = context.ticker()
    tick = ticker.stage("faithfulness", len(pairs))
    items = [(model, source_ids(tokenizer, p.src, max_len, special), output_ids(tokenizer, p.tgt, max_len, special),
              settings) for p in pairs]
    mine = list(split.mine(len(items)))
    own: dict[int, dict] = {}
    for i in mine:
        own[i] = sentence_faithfulness(*items[i])
        ticker.check(tick, min(len(items), len(own) * split.world))
    per_sentence = split.gather(own, len(items))
    context.say(f"{len(pairs)} sentences in {time.time() - t0:.1f} s")
    return {"settings": {**context.checkpoint(), "check": "faithfulness", "sentences": len(pairs), "removal": "unk id",
                         "methods": list(settings.methods), "fractions": list(settings.fractions),
                         "seeds": settings.seeds, "ig_steps": settings.ig_steps},
            "processes": split.world,
            "rows": table(per_sentence, settings), "per_sentence": fraction_means(per_sentence),
            "seconds": round(time.time() - t0, 1)}


def fraction_means(per_sentence: list[dict]) -> dict:
    """{ranking: {measure: [[mean over tokens per fraction] per sentence]}}: what `table` reads, so that
    runs over parts of a test set can be put together into one table (from_fraction_means)."""
    return {name: {measure: [np.round(s[name][measure].mean(axis=1), 6).tolist() for s in per_sentence]
                   for measure in ("comprehensiveness", "sufficiency")} for name in per_sentence[0]} if per_sentence else {}


def from_fraction_means(saved: dict) -> list[dict]:
    """fraction_means back into per-sentence measures [F, 1] that `table` reads as it reads [F, T]."""
    n = len(next(iter(next(iter(saved.values())).values())))
    return [{name: {measure: np.array(values[i])[:, None] for measure, values in by.items()}
             for name, by in saved.items()} for i in range(n)]


SAME = ("checkpoint", "weights_sha256", "removal", "methods", "fractions", "seeds", "ig_steps")


def combine(results: list[dict], weights_sha256: str = "") -> dict:
    """Scorecards of consecutive parts of a test set (--pairs of each part) as one: the per-sentence
    fraction means put together and the table computed again over all of them. ValueError when the
    parts differ in a setting or checkpoint, or one lacks its per-sentence means."""
    if not results:
        raise ValueError("nothing to combine")
    first = results[0]["settings"]
    for r in results:
        if not r.get("per_sentence") or r.get("settings", {}).get("check") != "faithfulness":
            raise ValueError("a file to combine is not a faithfulness scorecard with per-sentence means")
        differ = [k for k in SAME if r["settings"].get(k) != first.get(k)]
        if differ:
            raise ValueError(f"the scorecards differ in {', '.join(differ)}")
    if weights_sha256 and first.get("weights_sha256") != weights_sha256:
        raise ValueError("the scorecards were measured on other weights than this checkpoint's")
    saved = {name: {m: [v for r in results for v in r["per_sentence"][name][m]] for m in by}
             for name, by in results[0]["per_sentence"].items()}
    settings = FaithfulnessSettings(methods=tuple(first["methods"]), fractions=tuple(first["fractions"]),
                                    seeds=first["seeds"], ig_steps=first["ig_steps"])
    per_sentence = from_fraction_means(saved)
    return {"settings": {**first, "sentences": len(per_sentence), "parts": len(results)},
            "rows": table(per_sentence, settings), "per_sentence": saved,
            "seconds": round(sum(r.get("seconds", 0) for r in results), 1)}


def report(result: dict) -> str:
    lines = [f"faithfulness over {result['settings']['sentences']} sentences (source tokens replaced by unk; "
             f"fractions {result['settings']['fractions']}), mean log-prob drop with 95% interval",
             f"{'method':<24}{'comprehensiveness':>28}{'sufficiency':>28}"]
    by = {(r["method"], r["measure"]): r for r in result["rows"]}
    for method in dict.fromkeys(r["method"] for r in result["rows"]):
        cells = [f"{by[(method, m)]['mean']:.3f} [{by[(method, m)]['ci95'][0]:.3f}, {by[(method, m)]['ci95'][1]:.3f}]"
                 for m in ("comprehensiveness", "sufficiency")]
        lines.append(f"{method:<24}{cells[0]:>28}{cells[1]:>28}")
    return "\n".join(lines)


FAITHFULNESS = Study("contributions", run_faithfulness, ("settings", "rows", "per_sentence"), report, ("faithfulness",))
