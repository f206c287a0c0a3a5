"""Evaluation: dev loss, BLEU, chrF and exact match; `python -m explorer.evaluate checkpoints/<name>`.

The CLI scores the checkpoint's held-out test split with greedy and beam search (sacrebleu
defaults) and writes the figures into the checkpoint's card.json, which the app and README show.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import sacrebleu
import torch
import torch.nn.functional as F

from explorer.config import DecodeConfig, resolve_device
from explorer.data.batching import pad_batch


def corpus_scores(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """BLEU and chrF (sacrebleu defaults) and the fraction of exact matches."""
    if not hyps:
        return {"bleu": 0.0, "chrf": 0.0, "exact": 0.0}
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
            "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
            "exact": sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / len(hyps)}


@torch.no_grad()
def teacher_forced_loss(model, split, device, batch_size: int = 64) -> float:
    """Mean per-token cross-entropy (no smoothing) of the references."""
    total, count, pad = 0.0, 0, model.cfg.pad_id
    for i in range(0, len(split), batch_size):
        src = pad_batch(split.src[i:i + batch_size], pad).to(device)               # [B, S]
        tgt = pad_batch(split.tgt[i:i + batch_size], pad).to(device)               # [B, T+1]
        logits = model(src, tgt[:, :-1], return_logits=True)                       # [B, T, V]
        total += float(F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                                       ignore_index=pad, reduction="sum"))
        count += int((tgt[:, 1:] != pad).sum())
    return total / max(count, 1)


@torch.no_grad()
def translate_ids(model, src_ids: list[list[int]], cfg: DecodeConfig, device, batch_size: int = 64) -> list[list[int]]:
    """Decode many sources in length-sorted batches; returns output ids (no BOS/EOS) in input order."""
    from explorer.decoding import decode_batch

    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out: list[list[int]] = [[] for _ in src_ids]
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        for i, ids in zip(idx, decode_batch(model, [src_ids[i] for i in idx], cfg, device=device)):
            out[i] = ids
    return out


def evaluate_split(model, tokenizer, split, n_sentences: int, device, tgt_lang: str = "",
                   cfg: DecodeConfig | None = None) -> dict:
    """Dev loss on the whole split; BLEU/chrF/exact on its first `n_sentences` (greedy by default)."""
    was_training = model.training
    model.eval()
    try:
        loss = teacher_forced_loss(model, split, device)
        n = min(n_sentences, len(split))
        cfg = cfg or DecodeConfig(strategy="greedy")
        hyps_ids = translate_ids(model, split.src[:n], cfg, device)
        hyps = [tokenizer.decode(ids, side="tgt") for ids in hyps_ids]
        refs = split.tgt_text[:n]
        scores = corpus_scores(hyps, refs)
    finally:
        model.train(was_training)
    samples = [{"src": s, "ref": r, "hyp": h} for s, r, h in zip(split.src_text[:3], refs[:3], hyps[:3])]
    return {"dev_loss": loss, "dev_ppl": float(torch.tensor(loss).exp()), **scores, "n": n, "samples": samples}


def main(argv: list[str] | None = None) -> int:
    from explorer.data.files import read_tsv
    from explorer.store.checkpoint import CheckpointError, load_checkpoint, read_card, write_card
    from explorer.training.inputs import encode_pairs

    parser = argparse.ArgumentParser(prog="python -m explorer.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--test", help="TSV of src<TAB>tgt (default: the checkpoint's test.tsv, else the "
                                       "test split of the dataset it was trained on)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (CUDA when present)")
    parser.add_argument("--no-write", action="store_true", help="do not update card.json")
    args = parser.parse_args(argv)
    try:
        ckpt = load_checkpoint(args.checkpoint, device=args.device)
    except CheckpointError as err:
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
    if args.limit:
        pairs = pairs[:args.limit]
    split = encode_pairs(ckpt.tokenizer, pairs, ckpt.config.max_len, ckpt.config.special)
    device = resolve_device(args.device)
    results = {"test_set": test_name, "n": len(split)}
    for label, cfg in (("greedy", DecodeConfig(strategy="greedy")),
                       (f"beam{args.beam}", DecodeConfig(strategy="beam", beam_size=args.beam, n_best=1))):
        t0 = time.time()
        hyps = [ckpt.tokenizer.decode(ids, side="tgt") for ids in translate_ids(ckpt.model, split.src, cfg, device)]
        scores = corpus_scores(hyps, split.tgt_text)
        scores["seconds"] = round(time.time() - t0, 1)
        results[label] = {k: round(v, 4 if k == "exact" else 2) if isinstance(v, float) else v
                          for k, v in scores.items()}
        print(f"{Path(args.checkpoint).name} {label:8s} BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
              f"exact {scores['exact']:.3f}  ({len(split)} sentences, {scores['seconds']} s)")
    results["test_loss"] = round(teacher_forced_loss(ckpt.model, split, device), 4)
    if not args.no_write:
        try:                                        # every other section (the model card) is kept
            old = read_card(args.checkpoint)
        except CheckpointError as err:              # a damaged card.json: replaced, and said so
            print(f"warning: {err}; card.json is rewritten with the new results only", file=sys.stderr)
            old = None
        card = {**(old if isinstance(old, dict) else {}), "test": results,
                "evaluated": time.strftime("%Y-%m-%d %H:%M:%S")}
        write_card(args.checkpoint, card)
        if not args.test and not args.limit and (ckpt.path / "test.tsv").is_file():
            from explorer.evaluation.showcase import record     # the pair the app opens on, precomputed

            record(args.checkpoint, args.device)
    return 0


def held_out_pairs(ckpt_path: str | Path, meta: dict, data_dir: str | Path | None = None) -> tuple[list, Path | str]:
    """A checkpoint's held-out test sentences and where they come from: its own test.tsv (shipped
    checkpoints carry one; the Path), else the test split of the dataset it was trained on (the
    dataset's name). For the evaluate command and the Checkpoints page alike. DataError when the
    checkpoint has neither, or that dataset cannot be built."""
    from explorer.data import DataError, load_corpus
    from explorer.data.files import read_tsv
    from explorer.store.checkpoint import TEST_SPLIT

    own = Path(ckpt_path) / TEST_SPLIT
    if own.is_file():
        return read_tsv(str(own)), own
    dataset = (meta.get("training") or {}).get("dataset")
    if not dataset:
        raise DataError(f"{ckpt_path} has no {TEST_SPLIT} and names no training dataset")
    return load_corpus(dataset, data_dir=str(data_dir) if data_dir else None).test, str(dataset)


if __name__ == "__main__":
    sys.exit(main())
