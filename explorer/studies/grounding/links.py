"""Which target words each source word brings along in the training data, and the output words of a
translation that no word of its source brings along: the marks the Translate page puts on a guess.

A link s -> t holds when the training target of at least LINK_SHARE of the training verses whose source
has s contains t, and of at least LINK_MIN of them: "weary" is linked from "cansado" because 9 of the 17
verses with "cansado" have "weary". Counted exactly (co-occurrence in the same training pair), not
aligned: an aligner such as eflomal samples, so its links differ from run to run and a shipped table
could not be rebuilt and checked; a count can, and it reads as a concordance ("9 of the 17 training
verses with 'cansado' have 'weary'"). Common target words (GLUE_SHARE: at least once per hundred
training pairs: the, of, and, he, lord ...) need no source word's support and are never marked, so the
table leaves them out.

An output word is marked when it is not glue and no word of its source links to it: the model wrote a
word its training data never showed beside any word it was given. On 30 everyday sentences translated by
bible-es-en, against wrong output words marked by hand (gold/everyday-es-en-wrong.tsv, the rule in
gold/README-everyday.md), `python -m benchmarks grounding` measures the marks' precision and recall.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from explorer.studies.common.words import words

LINK_SHARE = 0.1          # of the training pairs whose source has s, the share whose target has t
LINK_MIN = 2              # and at least this many of them
GLUE_SHARE = 0.01         # a target word at least this often per training pair is glue: never marked
CHUNK = 4096              # training pairs counted at once (the co-occurrence keys of one chunk in memory)


def glue(tgt_words: dict[str, int], pairs: int) -> set[str]:
    """The target words common enough to need no support: at least GLUE_SHARE x pairs occurrences."""
    return {w for w, n in tgt_words.items() if n >= GLUE_SHARE * pairs}


def count_links(pairs: Iterable, skip: set[str]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """({s: {t: pairs with s in the source and t in the target}} for the links that hold, {s: pairs with s
    in the source}) over training pairs (objects with .src and .tgt); target words in `skip` left out.

    Exact counts: each pair's (source word, target word) combinations, each word once per pair, as one
    int64 key each; keys are counted a chunk at a time (np.unique) and the chunks' counts merged, so memory
    follows the distinct combinations, not the corpus."""
    src_ids: dict[str, int] = {}
    tgt_ids: dict[str, int] = {}
    verses: list[int] = []                                  # pairs per source word id
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    chunk: list[np.ndarray] = []

    def merge() -> None:
        nonlocal keys, counts
        if not chunk:
            return
        found, n = np.unique(np.concatenate(chunk), return_counts=True)            # [K]
        both = np.concatenate([keys, found])                                         # [K']
        keys, where = np.unique(both, return_inverse=True)
        counts = np.bincount(where, weights=np.concatenate([counts, n])).astype(np.int64)
        chunk.clear()

    shift = 1 << 31                                          # key = source id * 2^31 + target id
    for k, pair in enumerate(pairs):
        src = [src_ids.setdefault(w, len(src_ids)) for w in sorted(set(words(pair.src)))]
        tgt = [tgt_ids.setdefault(w, len(tgt_ids)) for w in sorted(set(words(pair.tgt))) if w not in skip]
        verses.extend([0] * (len(src_ids) - len(verses)))
        for s in src:
            verses[s] += 1
        if src and tgt:
            chunk.append((np.array(src, np.int64)[:, None] * shift + np.array(tgt, np.int64)[None, :]).ravel())
        if (k + 1) % CHUNK == 0:
            merge()
    merge()
    src_of, tgt_of = list(src_ids), list(tgt_ids)
    s_idx, t_idx = keys // shift, keys % shift                                       # [K]
    share = counts >= np.maximum(LINK_MIN, np.ceil(LINK_SHARE * np.array(verses, np.int64)[s_idx] - 1e-9))
    links: dict[str, dict[str, int]] = {}
    for s, t, n in zip(s_idx[share].tolist(), t_idx[share].tolist(), counts[share].tolist()):
        links.setdefault(src_of[s], {})[tgt_of[t]] = n
    return links, {w: verses[i] for w, i in src_ids.items()}


@dataclass(frozen=True)
class OutputWord:
    word: str
    marked: bool              # no word of the source links to it, and it is not glue
    source: str | None        # the source word that links to it most often (None: glue or marked)
    together: int             # training pairs with both
    of: int                   # training pairs with that source word


def output_words(links: dict[str, dict[str, int]], src_verses: dict[str, int], common: set[str],
                 source: str, output: str) -> tuple[OutputWord, ...]:
    """Each word of the output, in order, marked or with the source word that brings it along."""
    given = list(dict.fromkeys(words(source)))
    out = []
    for t in words(output):
        if t in common:
            out.append(OutputWord(t, False, None, 0, 0))
            continue
        best = max(((links.get(s, {}).get(t, 0), s) for s in given), default=(0, None))
        if best[0]:
            out.append(OutputWord(t, False, best[1], best[0], src_verses.get(best[1], 0)))
        else:
            out.append(OutputWord(t, True, None, 0, 0))
    return tuple(out)


def marked(found: Sequence[OutputWord]) -> list[str]:
    """The marked words, each once, in order."""
    return list(dict.fromkeys(w.word for w in found if w.marked))


def mutual_pairs(links: dict[str, dict[str, int]], n: int) -> list[tuple[str, str, int]]:
    """The n most frequent word pairs (s, t, pairs with both) that the links tie both ways: t is the target
    word s is most often linked to, and s the source word most often linked to t. The mutual choice keeps
    translations ("dios", "god") and drops a frequent source word's incidental partner."""
    best_target = {s: max(ts.items(), key=lambda kv: (kv[1], kv[0])) for s, ts in links.items() if ts}
    best_source: dict[str, tuple[int, str]] = {}
    for s, ts in links.items():
        for t, count in ts.items():
            if (count, s) > best_source.get(t, (0, "")):
                best_source[t] = (count, s)
    found = [(s, t, count) for s, (t, count) in best_target.items() if best_source.get(t, (0, ""))[1] == s]
    return sorted(found, key=lambda p: (-p[2], p[0]))[:n]
