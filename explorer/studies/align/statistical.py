"""An external statistical aligner on the same pairs, as the reference band: eflomal.

eflomal (Östling & Tiedemann 2016, "Efficient word alignment with Markov Chain Monte Carlo"; PyPI
`eflomal`) is an unsupervised IBM-model aligner with an HMM and fertility: it learns from a parallel
corpus and aligns every pair of it. As it is meant to be used, it runs on the checkpoint's training
corpus with the gold pairs appended, in both directions, and the two directions are symmetrised
with grow-diag-final-and (explorer.studies.align.metrics); only the gold pairs' links are kept.

Its words are the gold file's words, lowercased and with punctuation at their edges stripped
("serpiente:" and "serpiente" are one word to a count-based model; a token of punctuation only stays
as it is), so the links index the gold words one for one.
"""
from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Sequence

from explorer.studies.align.gold import GoldPair, Link, parse_links
from explorer.studies.align.metrics import grow_diag_final_and
from explorer.studies.common.words import words

MAX_TRAIN_PAIRS = 200_000            # pairs of training corpus given to the aligner (a memory bound)
MAX_TRAIN_WORDS = 120                # longer training sentences are left out (eflomal is quadratic per pair)
_EDGE_PUNCTUATION = "\"'“”‘’«»¿¡.,;:!?()[]{}-—–…"


def normalise(word: str) -> str:
    core = word.strip(_EDGE_PUNCTUATION)
    return (core or word).lower()


def _line(text: str) -> str:
    return " ".join(normalise(w) for w in text.split())


def train_lines(pairs: Sequence, limit: int = MAX_TRAIN_PAIRS) -> tuple[list[str], list[str]]:
    """Training pairs (objects with .src and .tgt text) as normalised word lines, at most `limit`,
    leaving out empty and over-long ones."""
    src, tgt = [], []
    for p in pairs:
        s, t = p.src.split(), p.tgt.split()
        if s and t and len(s) <= MAX_TRAIN_WORDS and len(t) <= MAX_TRAIN_WORDS:
            src.append(_line(p.src))
            tgt.append(_line(p.tgt))
            if len(src) >= limit:
                break
    return src, tgt


def available() -> str | None:
    """None when eflomal can be imported, else why not (the scorecard then shows published figures)."""
    try:
        import eflomal  # noqa: F401
    except ImportError as err:
        return f"eflomal is not installed ({err}); `pip install eflomal` (in the project's dev extras)"
    return None


def eflomal_links(gold: Sequence[GoldPair], train: Sequence = ()) -> dict[str, list[set[Link]]]:
    """Links per gold pair from eflomal trained on `train` + the gold pairs: "forward", "reverse" and
    "grow-diag-final-and" (the symmetrised one, the row the scorecard shows). eflomal samples: two
    runs can differ slightly (its C sampler seeds itself)."""
    src, tgt = train_lines(train)
    first = len(src)
    src += [_line(p.src_text) for p in gold]
    tgt += [_line(p.tgt_text) for p in gold]
    fwd_lines, rev_lines = (lines[first:] for lines in _align(src, tgt))
    if len(fwd_lines) != len(gold) or len(rev_lines) != len(gold):
        raise RuntimeError(f"eflomal returned {len(fwd_lines)}/{len(rev_lines)} alignments for {len(gold)} pairs")
    out: dict[str, list[set[Link]]] = {"forward": [], "reverse": [], "grow-diag-final-and": []}
    for pair, f, r in zip(gold, fwd_lines, rev_lines):
        fwd = set(parse_links(f, len(pair.src), len(pair.tgt))[0])
        rev = set(parse_links(r, len(pair.src), len(pair.tgt))[0])
        out["forward"].append(fwd)
        out["reverse"].append(rev)
        out["grow-diag-final-and"].append(grow_diag_final_and(fwd, rev))
    return out


def _align(src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
    """eflomal's forward and reverse links (Pharaoh text), a line per pair of word lines."""
    import eflomal

    with tempfile.TemporaryDirectory(prefix="eflomal-") as tmp:
        fwd_path, rev_path = Path(tmp) / "fwd", Path(tmp) / "rev"
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd_path), links_filename_rev=str(rev_path),
                                quiet=True)
        return (fwd_path.read_text(encoding="utf-8").splitlines(),
                rev_path.read_text(encoding="utf-8").splitlines())


def frequent_pairs(pairs: Sequence, n: int, limit: int = MAX_TRAIN_PAIRS) -> list[tuple[str, str, int]]:
    """The n word pairs (source word, target word, links) that eflomal links most often over `pairs` (a
    corpus's training pairs, at most `limit`), both directions symmetrised with grow-diag-final-and, the
    most frequent first (ties by the words). Words as studies.common.words.words() reads them, the words
    the features' detection labels its pieces with. eflomal samples, so a pair near the n-th place can
    change from run to run."""
    src, tgt = [], []
    for p in pairs:
        s, t = words(p.src), words(p.tgt)
        if s and t and len(s) <= MAX_TRAIN_WORDS and len(t) <= MAX_TRAIN_WORDS:
            src.append(s)
            tgt.append(t)
            if len(src) >= limit:
                break
    if not src:
        return []
    counts: Counter = Counter()
    for s, t, f, r in zip(src, tgt, *_align([" ".join(w) for w in src], [" ".join(w) for w in tgt])):
        fwd = parse_links(f, len(s), len(t))[0]
        rev = parse_links(r, len(s), len(t))[0]
        counts.update((s[i], t[j]) for i, j in grow_diag_final_and(set(fwd), set(rev)))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [(s, t, count) for (s, t), count in ranked]
