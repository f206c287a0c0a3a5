"""`python -m explorer evaluate checkpoints/<name>`: score a checkpoint's held-out test split.

Greedy and beam search (sacrebleu defaults); the figures go into the checkpoint's card.json, which the
app and README show, with the test pair the app opens on (evaluation.showcase). `--int8` scores an int8
copy of the model instead (explorer/model/int8.py): its lines say int8 and its figures go into card.json's
own "test_int8" section, so the float model's figures are never replaced by int8 ones. Its own module because
it uses both scores and showcase, and showcase uses scores.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from explorer.config import DecodeConfig
from explorer.config.checks import MAX_BEAM
from explorer.data.encoded import encode_pairs
from explorer.data.files import read_tsv
from explorer.decoding.translate import forced_target
from explorer.evaluation.arguments import add_languages, count, with_languages
from explorer.evaluation.arguments import device as device_argument
from explorer.evaluation.scores import corpus_scores, held_out_pairs, own_test_split, teacher_forced_loss, translate_ids
from explorer.evaluation.showcase import record
from explorer.model.int8 import Int8Unavailable, quantize
from explorer.runtime.device import resolve_device
from explorer.store import checkpoint as checkpoint_store   # load_checkpoint read at each call: a stand-in is seen
from explorer.store.checkpoint import CheckpointError, read_card, write_card


def is_its_test_set(ckpt, pairs: list) -> bool:
    """Do `pairs` (a --test file) stand for the checkpoint's test set: its own test.tsv, or any file when it
    has no held-out split at all (no test.tsv, no training dataset named: a model imported or trained
    elsewhere)? Another file's figures do not go into card.json's test section, which the app labels the
    checkpoint with; a run's dataset split is scored without --test (never built here, after the decoding)."""
    own = own_test_split(ckpt.path)
    if own is None:
        return not (ckpt.meta.get("training") or {}).get("dataset")
    try:
        return [(p.src, p.tgt) for p in read_tsv(str(own))] == [(p.src, p.tgt) for p in pairs]
    except (ValueError, OSError):                   # its own split cannot be read: nothing stands for it
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--test", help="TSV of src<TAB>tgt (default: the checkpoint's test.tsv, else the "
                                       "test split of the dataset it was trained on); another file's figures "
                                       "are printed, not written into card.json")
    parser.add_argument("--limit", type=count("limit", 0, 10_000_000), default=0,
                        help="only the first N sentences (0: all); fewer than all are not written to card.json")
    parser.add_argument("--beam", type=count("beam", 1, MAX_BEAM), default=5)
    parser.add_argument("--device", type=device_argument, default="cpu",
                        help="cpu, cuda, cuda:N, mps or auto (CUDA when present)")
    parser.add_argument("--no-write", action="store_true", help="do not update card.json")
    add_languages(parser)
    parser.add_argument("--int8", action="store_true",
                        help="decode with an int8 copy of the model (CPU only; the results say int8 and go into "
                             "card.json's test_int8 section)")
    args = parser.parse_args(argv)
    if args.int8 and resolve_device(args.device).type != "cpu":
        print("error: --int8 decodes on the CPU only; leave out --device or pass --device cpu", file=sys.stderr)
        return 2
    try:
        ckpt = checkpoint_store.load_checkpoint(args.checkpoint, device=args.device)
        model = quantize(ckpt.model) if args.int8 else ckpt.model
    except (CheckpointError, Int8Unavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        if args.test:
            test_name, pairs = Path(args.test).name, read_tsv(args.test)
        else:
            pairs, origin = held_out_pairs(ckpt.path, ckpt.meta)
            test_name = origin.name if isinstance(origin, Path) else f"{origin} test split"
    except ValueError as err:          # DataError: missing/bad file, with the line number
        print(f"error: {err}" + ("" if args.test else "; pass --test FILE.tsv"), file=sys.stderr)
        return 2
    whole = len(pairs)
    if args.limit:
        pairs = pairs[:args.limit]
    try:
        tokenizer = with_languages(ckpt.tokenizer, args.src_lang, args.tgt_lang)
        split = encode_pairs(tokenizer, pairs, ckpt.config.max_len, ckpt.config.special)
    except ValueError as err:          # no language, or an unknown one: one line naming some
        print(f"error: {err}", file=sys.stderr)
        return 2
    device = resolve_device(args.device)
    results = {"test_set": test_name, "n": len(split)}
    cut = sum(len(ids) >= ckpt.config.max_len for ids in split.src)    # with_eos stops a source at max_len ids
    if cut:
        results["sources_cut"] = cut
        print(f"note: {cut} of {len(split)} sources fill the model's {ckpt.config.max_len} positions and are cut "
              "there: their translations are of the cut sentences", file=sys.stderr)
    if forced_target(tokenizer):                             # a multilingual model: the pair these figures are for
        results["languages"] = [tokenizer.src_lang, tokenizer.tgt_lang]
    if args.int8:
        results["int8"] = model.kernel                        # every int8 result says what computed it
    for label, cfg in (("greedy", DecodeConfig(strategy="greedy")),
                       (f"beam{args.beam}", DecodeConfig(strategy="beam", beam_size=args.beam, n_best=1))):
        t0 = time.time()
        hyps = [tokenizer.decode(ids, side="tgt")
                for ids in translate_ids(model, split.src, cfg, device, given=forced_target(tokenizer))]
        scores = corpus_scores(hyps, split.tgt_text)
        scores["seconds"] = round(time.time() - t0, 1)
        results[label] = {k: round(v, 4 if k == "exact" else 2) if isinstance(v, float) else v
                          for k, v in scores.items()}
        name = Path(args.checkpoint).name + (" int8" if args.int8 else "")
        print(f"{name} {label:8s} BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
              f"exact {scores['exact']:.3f}  ({len(split)} sentences, {scores['seconds']} s)")
    results["test_loss"] = round(teacher_forced_loss(model, split, device), 4)
    if len(pairs) < whole and not args.no_write:   # a trial run's figures never stand in for the whole set's
        print(f"note: card.json keeps its figures: these are of {len(pairs):,} of the {whole:,} test sentences "
              "(--limit); the app shows a card's figures as the test set's", file=sys.stderr)
    elif args.test and not args.no_write and not is_its_test_set(ckpt, pairs):
        print(f"note: card.json keeps its figures: these are of {test_name}, not this checkpoint's held-out test "
              "split; the app shows a card's figures as the test set's", file=sys.stderr)
    elif not args.no_write:
        try:                                        # every other section (the model card) is kept
            old = read_card(args.checkpoint)
        except CheckpointError as err:              # a damaged card.json: replaced, and said so
            print(f"warning: {err}; card.json is rewritten with the new results only", file=sys.stderr)
            old = None
        section = "test_int8" if args.int8 else "test"
        card = {**(old if isinstance(old, dict) else {}), section: results,
                **({} if args.int8 else {"evaluated": time.strftime("%Y-%m-%d %H:%M:%S")})}
        write_card(args.checkpoint, card)
        if not args.int8 and not args.test and not args.limit and own_test_split(ckpt.path) is not None:
            record(args.checkpoint, args.device)
    return 0

