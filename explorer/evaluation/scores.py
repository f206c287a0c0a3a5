"""Evaluation: dev loss, BLEU, chrF and exact match over a split (the evaluate command is command.py)."""
from __future__ import annotations

import os
from pathlib import Path

import sacrebleu
import torch
import torch.nn.functional as F

from explorer.config import DecodeConfig
from explorer.data import DataError, load_corpus
from explorer.data.batching import pad_batch
from explorer.data.files import read_tsv
from explorer.decoding import decode_batch
from explorer.decoding.translate import forced_target
from explorer.files.names import TEST_SPLIT
from explorer.runtime.modes import eval_mode


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
def translate_ids(model, src_ids: list[list[int]], cfg: DecodeConfig, device, batch_size: int = 64,
                  given: list[int] | None = None) -> list[list[int]]:
    """Decode many sources in length-sorted batches; returns output ids (no BOS/EOS) in input order.
    `given`: the tokens every output starts with (decoding.translate.forced_target of the tokenizer)."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out: list[list[int]] = [[] for _ in src_ids]
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        for i, ids in zip(idx, decode_batch(model, [src_ids[i] for i in idx], cfg, device=device, given=given)):
            out[i] = ids
    return out


def evaluate_split(model, tokenizer, split, n_sentences: int, device, tgt_lang: str = "",
                   cfg: DecodeConfig | None = None) -> dict:
    """Dev loss on the whole split; BLEU/chrF/exact on its first `n_sentences` (greedy by default)."""
    with eval_mode(model):
        loss = teacher_forced_loss(model, split, device)
        n = min(n_sentences, len(split))
        cfg = cfg or DecodeConfig(strategy="greedy")
        hyps_ids = translate_ids(model, split.src[:n], cfg, device, given=forced_target(tokenizer))
        hyps = [tokenizer.decode(ids, side="tgt") for ids in hyps_ids]
        refs = split.tgt_text[:n]
        scores = corpus_scores(hyps, refs)
    samples = [{"src": s, "ref": r, "hyp": h} for s, r, h in zip(split.src_text[:3], refs[:3], hyps[:3])]
    return {"dev_loss": loss, "dev_ppl": float(torch.tensor(loss).exp()), **scores, "n": n, "samples": samples}


# The most held-out pairs an analysis may be asked to run over: the largest shipped test set, bible-es-en's
# 1,002 verses (a test holds it equal to the shipped test.tsv files), so `--sentences` can name a whole one.
MAX_HELD_OUT = 1002


def own_test_split(ckpt_path: str | Path) -> Path | None:
    """The checkpoint's own test.tsv when anything stands there by that name. A FIFO, a folder or a link to
    /dev/zero there is read, and refused by read_tsv in one line, rather than taken for "no test set":
    that had scored the training dataset's split under the checkpoint's name, exit 0."""
    own = Path(ckpt_path) / TEST_SPLIT
    return own if os.path.lexists(own) else None


def held_out_pairs(ckpt_path: str | Path, meta: dict, data_dir: str | Path | None = None) -> tuple[list, Path | str]:
    """A checkpoint's held-out test sentences and where they come from: its own test.tsv (shipped
    checkpoints carry one; the Path), else the test split of the dataset it was trained on (the
    dataset's name). For the evaluate command and the Checkpoints page alike. DataError when the
    checkpoint has neither, or that dataset cannot be built."""
    own = own_test_split(ckpt_path)
    if own is not None:
        return read_tsv(str(own)), own
    dataset = (meta.get("training") or {}).get("dataset")
    if not dataset:
        raise DataError(f"{ckpt_path} has no {TEST_SPLIT} and names no training dataset")
    return load_corpus(dataset, data_dir=str(data_dir) if data_dir else None).test, str(dataset)

