"""Which test pair to open the app on: one the model translates well, chosen by a rule, not by hand.

A first visit should show what the model can do, not a sentence picked once by a person (which
goes stale when the checkpoint changes) nor simply the first line of test.tsv (bible-es-en's first
test verse has no English reference at all). The rule: among the first SHOWCASE_PAIRS test pairs
that have a reference, the one whose beam-5 translation (the Translate page's default decoding)
has the highest sentence chrF against its reference; the earliest wins a tie. Beam search runs in
length-sorted batches (evaluation.scores.translate_ids), about a second for the shipped models.

That second used to be spent by the app's first visitor before the Translate page could draw its
controls, so the choice is recorded in card.json (`python -m explorer showcase CKPT`,
and explorer.evaluate when it scores the checkpoint's own test.tsv): to_card() / from_card(). The
record names the weights (their short sha256) and a hash of the test pairs the rule looked at, so
a retrained model or an edited test.tsv is never given a stale choice: from_card() then answers
None and the app computes the rule as before. card.json is not hashed (config.json holds only the
weights' sha256), so adding the record keeps a shipped checkpoint valid.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Sequence

import sacrebleu
import torch
from torch import nn

from explorer.config import DecodeConfig
from explorer.data.files import read_tsv
from explorer.decoding.core import model_device, special_ids
from explorer.decoding.translate import encode_source, forced_target
from explorer.evaluation.arguments import device as device_argument
from explorer.evaluation.scores import own_test_split, translate_ids
from explorer.store import checkpoint as checkpoint_store   # load_checkpoint read at each call: a stand-in is seen
from explorer.store.checkpoint import CheckpointError, read_card, write_card

SHOWCASE_PAIRS = 24                  # test pairs looked at: enough to find a good one, cheap on a CPU
SHOWCASE_DECODING = DecodeConfig(strategy="beam", beam_size=5, n_best=1)
CARD_KEY = "showcase"                # card.json's section
RECORD_PAIRS = 300                   # test pairs handed to the rule when recording (the app offers 300)


@dataclass(frozen=True)
class Showcase:
    index: int                       # into the pairs given
    chrf: float                      # sentence chrF (0-100) of its translation against its reference
    translation: str


def best_translated(model: nn.Module, tokenizer, pairs: Sequence[tuple[str, str]], n: int = SHOWCASE_PAIRS,
                    cfg: DecodeConfig = SHOWCASE_DECODING) -> Showcase | None:
    """The best-translated of the first `n` (source, reference) pairs with a non-empty source and
    reference, by sentence chrF of cfg's translation; None when no pair qualifies."""
    special = special_ids(model)
    chosen, src_ids = [], []
    for i, (src, ref) in enumerate(pairs):
        if len(chosen) == n:
            break
        ids, _, _ = encode_source(tokenizer, src, model.cfg.max_len, special) if ref.strip() else ([], False, "")
        if ids:
            chosen.append(i)
            src_ids.append(ids)
    if not chosen:
        return None
    outputs = translate_ids(model, src_ids, cfg, model_device(model), batch_size=8, given=forced_target(tokenizer))
    best: Showcase | None = None
    for i, out in zip(chosen, outputs):
        text = tokenizer.decode(out, side="tgt")
        chrf = sacrebleu.sentence_chrf(text, [pairs[i][1]]).score
        if best is None or chrf > best.chrf:
            best = Showcase(index=i, chrf=chrf, translation=text)
    return best


def pairs_digest(pairs: Sequence[tuple[str, str]], n: int = SHOWCASE_PAIRS) -> str:
    """sha256 of the pairs best_translated() can look at: up to and including the n-th pair whose
    source and reference are both non-blank (one more pair when a source encodes to nothing)."""
    end, seen = len(pairs), 0
    for i, (src, ref) in enumerate(pairs):
        if src.strip() and ref.strip():
            seen += 1
            if seen == n:
                end = min(len(pairs), i + 2)
                break
    return hashlib.sha256(json.dumps([list(p) for p in pairs[:end]]).encode()).hexdigest()[:16]


def to_card(found: Showcase | None, pairs: Sequence[tuple[str, str]], weights_sha: str) -> dict:
    """card.json's "showcase" section for best_translated()'s answer on `pairs`."""
    return {"index": None if found is None else found.index, "weights_sha256": weights_sha,
            "pairs_sha256": pairs_digest(pairs), "pairs": SHOWCASE_PAIRS,
            "decoding": "beam5", "chrf": None if found is None else round(found.chrf, 4),
            "translation": None if found is None else found.translation}


def from_card(card, pairs: Sequence[tuple[str, str]], weights_sha: str) -> tuple[bool, int | None]:
    """(True, index) when card.json records the rule's choice for these weights and these pairs
    (index None: no pair qualified), else (False, None). card.json is untrusted: never raises."""
    rec = card.get(CARD_KEY) if isinstance(card, dict) else None
    if not isinstance(rec, dict) or rec.get("weights_sha256") != weights_sha or rec.get("pairs") != SHOWCASE_PAIRS \
            or rec.get("decoding") != "beam5" or rec.get("pairs_sha256") != pairs_digest(pairs):
        return False, None
    index = rec.get("index")
    if index is None:
        return True, None
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(pairs):
        return False, None
    return True, index


def record(checkpoint: str, device: str = "cpu") -> dict | None:
    """Compute the rule on a checkpoint's own test.tsv and write it into its card.json (other
    sections kept); returns the section, or None without a test.tsv."""
    ckpt = checkpoint_store.load_checkpoint(checkpoint, device=device)
    test = own_test_split(ckpt.path)
    if test is None:
        return None
    pairs = [(p.src, p.tgt) for p in read_tsv(str(test))[:RECORD_PAIRS]]
    section = to_card(best_translated(ckpt.model, ckpt.tokenizer, pairs), pairs, ckpt.sha256)
    old = read_card(ckpt.path)
    write_card(ckpt.path, {**(old if isinstance(old, dict) else {}), CARD_KEY: section})
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer showcase",
                                     description="Record the test pair the app opens on in each checkpoint's card.json.")
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--device", type=device_argument, default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)                         # as the app decodes (webapp.state._limit_threads)
    status = 0
    for path in args.checkpoints:                    # each one on its own: one that cannot be done stops no other
        try:
            section = record(path, args.device)
        except (CheckpointError, ValueError, OSError) as err:   # ValueError: a damaged test.tsv (DataError) too
            said = str(err)
            print(f"error: {said if path in said else f'{path}: {said}'}", file=sys.stderr)
            status = 2
            continue
        print(f"{path}: " + ("no test.tsv" if section is None else f"pair {section['index']} (chrF {section['chrf']})"))
    return status


if __name__ == "__main__":
    sys.exit(main())
