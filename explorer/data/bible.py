"""Spanish -> English Bible, verse-aligned, from the SWORD modules Debian ships.

Source: Reina-Valera 1909 (`spaRV1909eb`, package sword-text-sparv, KJV versification); target:
World English Bible (`engWEB2015eb`, package sword-text-web, NRSVA versification). Both are public
domain. Outside the deuterocanon (ignored) NRSVA and KJV share every OSIS ref we use, so verses
align by ref ("Gen.1.1").

What gets dropped, and why (measured: docs/DATA.md):
* chapters where RV1909 keeps Spanish numbering: each has an empty ES slot (the module merged or
  shifted verses) or is the chapter the shift spills into; a length-ratio detector confirms the
  spill-overs, and Job 39 was found by reading. Whole chapters go, because once numbering shifts
  every verse of the chapter is paired with its neighbour's translation;
* slots empty on either side after cleaning (WEB omits Luke 17:36 etc.);
* pairs whose word-count ratio exceeds 2.5 with more than 12 words (Comma Johanneum, verses WEB
  merges), and Rom 14:23, where WEB moved the Rom 16:25-27 doxology.
"""
from __future__ import annotations

import functools
import math
import os
import random
import statistics
from collections import Counter, defaultdict

from explorer.data.osis_clean import clean_verse, fix_drop_cap
from explorer.data.types import DataError, Pair

SWORD_PATH = "/usr/share/sword"
SRC_MODULE = "spaRV1909eb"
TGT_MODULE = "engWEB2015eb"
INSTALL_HINT = "apt-get install -y sword-text-sparv sword-text-web"

KNOWN_SHIFTED = {"Num.13", "Num.30", "1Sam.24", "Hos.12", "Jonah.2", "Job.39"}
KNOWN_BAD_PAIRS = {"Rom.14.23"}
MAX_RATIO, MIN_WORDS_FOR_RATIO = 2.5, 12


class BibleNotInstalled(DataError):
    """The SWORD modules are missing; the message names the apt-get command that installs them."""


def _open_modules(sword_path: str):
    """Both pysword Bibles, with the per-block decompression cached (73 s -> well under 1 s)."""
    try:
        from pysword.modules import SwordModules   # here: only the Bible needs it, and its absence is a DataError
    except ImportError as e:  # pragma: no cover - pysword is a declared dependency
        raise BibleNotInstalled(f"pysword is not installed ({e}); pip install pysword") from e
    conf_dir = os.path.join(sword_path, "mods.d")
    present = {f.lower() for f in os.listdir(conf_dir)} if os.path.isdir(conf_dir) else set()
    missing = [k for k in (SRC_MODULE, TGT_MODULE) if k.lower() + ".conf" not in present]
    if missing:
        raise BibleNotInstalled(
            f"SWORD module(s) {', '.join(missing)} not found under {sword_path}. "
            f"Install them with: {INSTALL_HINT}")
    modules = SwordModules(sword_path)
    modules.parse_modules()
    bibles = []
    for key in (SRC_MODULE, TGT_MODULE):
        bible = modules.get_bible_from_module(key)
        # pysword re-decompresses the whole book block for every verse (BlockType=BOOK).
        bible._decompressed_text = functools.lru_cache(maxsize=None)(bible._decompressed_text)
        bibles.append(bible)
    return bibles


def _read_slots(bible, books) -> dict[str, str]:
    """Raw markup by OSIS ref for every slot of `books` (KJV structure), '' for empty slots."""
    out: dict[str, str] = {}
    for book in books:
        texts = list(bible.get_iter(books=book.osis_name, clean=False))
        slots = [(c + 1, v + 1) for c, n in enumerate(book.chapter_lengths) for v in range(n)]
        if len(texts) != len(slots):
            raise DataError(f"{book.osis_name}: {len(texts)} texts for {len(slots)} slots")
        for (c, v), text in zip(slots, texts):
            out[f"{book.osis_name}.{c}.{v}"] = text
    return out


def _words(text: str) -> int:
    return len(text.split())


def _shifted(es: list[str], en: list[str]) -> bool:
    """Length-ratio shift detector: do the verses pair up better when offset by one slot?

    Compares the median |log(len_es / len_en)| as aligned with the same measure after shifting
    Spanish one verse later or earlier. A numbering shift makes the offset fit clearly better.
    """
    def cost(pairs):
        vals = [abs(math.log((_words(a) + 1) / (_words(b) + 1))) for a, b in pairs if a and b]
        return statistics.median(vals) if len(vals) >= 4 else float("inf")

    aligned = cost(zip(es, en))
    best_shift = min(cost(zip(es[1:], en)), cost(zip(es, en[1:])))
    return aligned > 0.25 and best_shift < 0.5 * aligned


def build_bible(sword_path: str = SWORD_PATH) -> tuple[list[Pair], dict]:
    """All aligned (es, en) pairs in canonical order, plus a report of what was dropped."""
    src_bible, tgt_bible = _open_modules(sword_path)
    books = [b for bs in src_bible.get_structure().get_books().values() for b in bs]
    raw_es = _read_slots(src_bible, books)
    raw_en = _read_slots(tgt_bible, [b for bs in tgt_bible.get_structure().get_books().values()
                                     for b in bs])
    last_of_book = {f"{b.osis_name}.{len(b.chapter_lengths)}.{b.chapter_lengths[-1]}"
                    for b in books}

    es_text = {ref: clean_verse(raw, "es", last_of_book=ref in last_of_book)
               for ref, raw in raw_es.items()}
    # Drop caps: a word is "common" if it is written lower-case more often than capitalised.
    counts = Counter(w for t in es_text.values() for w in t.split())
    is_common = lambda w: counts[w] > counts[w[:1].upper() + w[1:]]            # noqa: E731
    chapters: dict[str, list[tuple[str, str, str]]] = defaultdict(list)   # chapter -> [(ref, es, en)]
    for ref, es in es_text.items():
        if ref.rsplit(".", 1)[1] == "1":
            es = fix_drop_cap(es, is_common)
        en = clean_verse(raw_en.get(ref, ""), "en")
        chapters[ref.rsplit(".", 1)[0]].append((ref, es, en))

    empty_es = {ch for ch, rows in chapters.items() if any(not es for _, es, _ in rows)}
    detected = {ch for ch, rows in chapters.items()
                if _shifted([r[1] for r in rows], [r[2] for r in rows])}
    drop_chapters = empty_es | detected | KNOWN_SHIFTED
    pairs: list[Pair] = []
    report = {"slots": len(raw_es), "dropped_chapters": sorted(drop_chapters),
              "detected_shift": sorted(detected), "dropped_in_chapters": 0,
              "dropped_empty_en": [], "dropped_outliers": []}
    for ch, rows in chapters.items():
        if ch in drop_chapters:
            report["dropped_in_chapters"] += len(rows)
            continue
        for ref, es, en in rows:
            if not en:
                report["dropped_empty_en"].append(ref)
                continue
            a, b = _words(es), _words(en)
            ratio = max(a, b) / max(1, min(a, b))
            if ref in KNOWN_BAD_PAIRS or (ratio > MAX_RATIO and max(a, b) > MIN_WORDS_FOR_RATIO):
                report["dropped_outliers"].append(ref)
                continue
            pairs.append(Pair(es, en, ref))
    report["pairs"] = len(pairs)
    return pairs, report


def chapter_of(ref: str) -> str:
    """"Gen.1.1" -> "Gen.1"."""
    return ref.rsplit(".", 1)[0]


def split_by_chapter(pairs: list[Pair], seed: int = 1234, dev_size: int = 1000,
                     test_size: int = 1000) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Hold out whole chapters (shuffled with `seed`) until dev and test each reach their size.

    Whole chapters, so neighbouring verses of a held-out verse never leak into training.
    """
    order = sorted({chapter_of(p.ref) for p in pairs})
    random.Random(seed).shuffle(order)
    sizes: dict[str, int] = defaultdict(int)
    for p in pairs:
        sizes[chapter_of(p.ref)] += 1
    dev_ch, test_ch, n_dev, n_test = set(), set(), 0, 0
    for ch in order:
        if n_dev < dev_size:
            dev_ch.add(ch); n_dev += sizes[ch]
        elif n_test < test_size:
            test_ch.add(ch); n_test += sizes[ch]
        else:
            break
    train = [p for p in pairs if chapter_of(p.ref) not in dev_ch | test_ch]
    dev = [p for p in pairs if chapter_of(p.ref) in dev_ch]
    test = [p for p in pairs if chapter_of(p.ref) in test_ch]
    return train, dev, test
