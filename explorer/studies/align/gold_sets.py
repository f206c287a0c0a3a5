"""Which gold set a checkpoint is scored on when the user names none.

* numbers (trained on the numbers task): the gold of its held-out numbers, built from the grammar
  (explorer.studies.align.numbers_gold), exact by construction;
* Spanish -> English Bible checkpoints: gold/bible-es-en.align, aligned by hand by this project
  (docs/alignment_guidelines.md), all of it from the shipped test split;
* anything else: no default; the user passes a gold file (e.g. an imported en-fr model with a
  Hansards gold set converted to this format).
A gold set is only a fair test of a model that did not train on its sentences: `held_out_share`
says how many gold pairs are among the checkpoint's own held-out pairs, and the scorecard shows it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from explorer.studies.align.gold import MAX_BYTES, GoldError, GoldPair, parse_gold, read_gold
from explorer.studies.align.numbers_gold import numbers_gold
from explorer.files.user_files import UserFileError, read_user_file
from explorer.files.places import REPO_ROOT

GOLD_DIR = REPO_ROOT / "gold"
SHIPPED = {("bible", "es", "en"): "bible-es-en.align"}     # (training dataset, source, target) -> file
_NUMBER_REF = re.compile(r"^n=(\d{1,7})$")


def default_gold(meta: dict, held_out: Sequence) -> tuple[list[GoldPair], str]:
    """(gold pairs, where they come from) for a checkpoint's meta and its held-out pairs; GoldError
    when no gold set fits it."""
    dataset = (meta.get("training") or {}).get("dataset")
    if dataset == "numbers":
        numbers = [int(m.group(1)) for p in held_out if (m := _NUMBER_REF.match(getattr(p, "ref", "") or ""))]
        if not numbers:
            raise GoldError("this numbers checkpoint's held-out pairs carry no n=<number> references")
        return numbers_gold(numbers), f"numbers grammar ({len(numbers)} held-out numbers)"
    name = SHIPPED.get((dataset, meta.get("src_lang"), meta.get("tgt_lang")))
    if name is None:
        raise GoldError("no gold alignments ship for this checkpoint's languages and data: pass a gold file "
                        "(source ||| target ||| links, one pair per line)")
    return read_gold(GOLD_DIR / name), f"gold/{name}"


def _key(text: str) -> str:
    return " ".join(text.split())


def held_out_share(gold: Sequence[GoldPair], held_out: Sequence) -> int:
    """How many gold pairs appear (whitespace-normalised source and target) among the held-out pairs."""
    held = {(_key(p.src), _key(p.tgt)) for p in held_out}
    return sum((_key(g.src_text), _key(g.tgt_text)) in held for g in gold)


def user_gold(path: str | Path) -> tuple[list[GoldPair], str]:
    """(pairs, file name) of a gold file the user names: anything may be named (/dev/zero, a FIFO),
    so it is read through explorer.files.user_files (a regular file only, never blocking, at most
    MAX_BYTES); GoldError says what is wrong."""
    name = Path(path).name
    try:
        data = read_user_file(path, MAX_BYTES)
    except UserFileError as err:
        raise GoldError(str(err)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GoldError(f"{name}: not UTF-8 text") from None
    return parse_gold(text, name), name


def gold_from(path: str | Path | None, meta: dict, held_out: Sequence) -> tuple[list[GoldPair], str]:
    """The user's gold file when given, else the checkpoint's default."""
    if path:
        return user_gold(path)
    return default_gold(meta, held_out)
