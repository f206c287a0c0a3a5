"""Alignment error rate, precision and recall (Och & Ney 2003), and turning scores into links.

With a predicted link set A, sure gold links S and possible gold links P (S is a subset of P):
    precision = |A & P| / |A|        recall = |A & S| / |S|
    AER       = 1 - (|A & S| + |A & P|) / (|A| + |S|)
Counts are summed over the whole set before dividing (corpus level, as Och & Ney and every
published AER table do), so long sentences weigh more than short ones. A prediction that is
empty everywhere has precision 0 (by convention here), recall 0 and AER 1.

Scores to links (the extraction rules): a score matrix m[t, s] of target word t over source word s
(attention, attribution) gives
* "target": each target word's highest-scoring source word (Garg et al. 2019, Chen et al. 2020:
  argmax per target word), one link per target word;
* "mutual": links that are the argmax of both their row and their column (the intersection of the
  two directions' argmaxes; SimAlign's "ArgMax", Jalili Sabet et al. 2020): fewer, surer links.
Symmetrising two directional link sets (an aligner run both ways) uses Koehn et al.'s
grow-diag-final-and (Koehn, Och & Marcu 2003; the Moses training script's heuristic).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from explorer.studies.align.gold import GoldPair, Link

EXTRACTIONS = ("target", "mutual")


@dataclass(frozen=True)
class AlignmentScore:
    precision: float
    recall: float
    aer: float
    predicted: int          # |A| summed over pairs
    sure: int               # |S|
    hits_sure: int          # |A & S|
    hits_possible: int      # |A & P|

    def as_dict(self) -> dict:
        return {"precision": self.precision, "recall": self.recall, "aer": self.aer, "predicted": self.predicted,
                "sure": self.sure, "hits_sure": self.hits_sure, "hits_possible": self.hits_possible}


def score_links(gold: Sequence[GoldPair], predicted: Sequence[Iterable[Link]]) -> AlignmentScore:
    """Corpus-level precision, recall and AER of predicted links (source word, target word) per pair."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold pairs")
    a = s = a_s = a_p = 0
    for pair, links in zip(gold, predicted):
        links = set(links)
        a += len(links)
        s += len(pair.sure)
        a_s += len(links & pair.sure)
        a_p += len(links & pair.possible)
    precision = a_p / a if a else 0.0
    recall = a_s / s if s else 0.0
    aer = 1.0 - (a_s + a_p) / (a + s) if a + s else 0.0
    return AlignmentScore(precision, recall, aer, a, s, a_s, a_p)


def extract_links(matrix: np.ndarray, rule: str = "target") -> set[Link]:
    """Links (source word, target word) from m[t, s] by an EXTRACTIONS rule."""
    m = np.asarray(matrix, dtype=np.float64)                                  # [T, S]
    if rule not in EXTRACTIONS:
        raise ValueError(f"extraction rule must be one of {EXTRACTIONS}, not {rule!r}")
    if m.ndim != 2 or 0 in m.shape:
        return set()
    best_src = m.argmax(axis=1)                                               # [T]
    if rule == "target":
        return {(int(s), t) for t, s in enumerate(best_src)}
    best_tgt = m.argmax(axis=0)                                               # [S]
    return {(int(s), t) for t, s in enumerate(best_src) if best_tgt[s] == t}


_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Iterable[Link], backward: Iterable[Link]) -> set[Link]:
    """Symmetrise two directional alignments (both as (source, target) links): start from their
    intersection, grow into neighbouring (incl. diagonal) union links that align a word not yet
    aligned, then add union links whose both words are still unaligned ("final-and")."""
    fwd, bwd = set(forward), set(backward)
    union = fwd | bwd
    links = fwd & bwd
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}
    grew = True
    while grew:
        grew = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                cand = (i + di, j + dj)
                if cand in union and cand not in links and (cand[0] not in src_done or cand[1] not in tgt_done):
                    links.add(cand)
                    src_done.add(cand[0])
                    tgt_done.add(cand[1])
                    grew = True
    for direction in (fwd, bwd):
        for i, j in sorted(direction):
            if (i, j) not in links and i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return links


def agreement(first: Sequence[GoldPair], second: Sequence[GoldPair]) -> dict:
    """How two annotators' passes over the same pairs agree: AER of each one's sure links against the
    other as gold, AER of each one's possible links (P) against the other, and the F1 of their sure links."""
    if [(p.src, p.tgt) for p in first] != [(p.src, p.tgt) for p in second]:
        raise ValueError("the two passes do not hold the same sentence pairs")
    both = sum(len(a.sure & b.sure) for a, b in zip(first, second))
    total = sum(len(a.sure) + len(b.sure) for a, b in zip(first, second))
    return {"pairs": len(first),
            "aer_second_sure_vs_first": score_links(first, [p.sure for p in second]).aer,
            "aer_first_sure_vs_second": score_links(second, [p.sure for p in first]).aer,
            "aer_second_possible_vs_first": score_links(first, [p.possible for p in second]).aer,
            "sure_f1": 2 * both / total if total else 1.0}
