"""What int8 costs in translations: a checkpoint's test set translated by the float model and by its int8
copy (explorer/model/int8.py), the int8 outputs scored against the float ones (BLEU, the share of
identical outputs) and each against the references; and, for `benchmarks marian`'s random OPUS-MT-size
model, the same comparison of two id sequences lists (ours int8 against CTranslate2 int8's).

Why BLEU against the float model's outputs and not only against the references: the question is how
far int8 moves the translations, which a reference-based score hides when both are equally wrong. The
goal the issue set: within 0.5 BLEU of float32 (against the references) and the share of identical
outputs stated. Decoding is the evaluate command's (batches of 64, length-sorted), beam 5.
"""
from __future__ import annotations

import time
from pathlib import Path

import sacrebleu

from explorer.config import DecodeConfig
from explorer.data.encoded import encode_pairs
from explorer.evaluation.scores import corpus_scores, held_out_pairs, translate_ids
from explorer.model.int8 import quantize
from explorer.store.checkpoint import load_checkpoint

BIBLE = Path(__file__).resolve().parents[1] / "checkpoints" / "bible-es-en"


def agreement(ours: list[list[int]] | list[str], theirs: list[list[int]] | list[str]) -> dict:
    """BLEU of `ours` against `theirs` as the reference (id lists are joined as words) and the share
    of identical outputs."""
    def text(x):
        return x if isinstance(x, str) else " ".join(map(str, x))
    ours_t, theirs_t = [text(x) for x in ours], [text(x) for x in theirs]
    same = sum(a == b for a, b in zip(ours_t, theirs_t))
    return {"bleu": round(sacrebleu.corpus_bleu(ours_t, [theirs_t]).score, 2), "identical": same,
            "n": len(ours_t), "identical_share": round(same / max(len(ours_t), 1), 4)}


def held_out_agreement(checkpoint: str | Path = BIBLE, limit: int = 0, beam: int = 5) -> dict:
    """The checkpoint's test set (its test.tsv; `limit` > 0: the first `limit`) by float32 and by int8:
    the int8 outputs against the float ones, each against the references, and the seconds each took."""
    ckpt = load_checkpoint(checkpoint)
    pairs, _ = held_out_pairs(ckpt.path, ckpt.meta)
    pairs = pairs[:limit] if limit else pairs
    split = encode_pairs(ckpt.tokenizer, pairs, ckpt.config.max_len, ckpt.config.special)
    cfg = DecodeConfig(strategy="beam", beam_size=beam, n_best=1)
    out: dict = {"checkpoint": Path(checkpoint).name, "n": len(split), "beam": beam}
    texts = {}
    for label, model in (("float32", ckpt.model), ("int8", quantize(ckpt.model))):
        start = time.process_time()
        texts[label] = [ckpt.tokenizer.decode(ids, side="tgt") for ids in translate_ids(model, split.src, cfg, "cpu")]
        scores = corpus_scores(texts[label], split.tgt_text)
        out[label] = {"bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2),
                      "cpu_s": round(time.process_time() - start, 1)}
    out["int8_vs_float32"] = agreement(texts["int8"], texts["float32"])
    out["bleu_drop"] = round(out["float32"]["bleu"] - out["int8"]["bleu"], 2)
    return out


def report(result: dict) -> str:
    """The test-set comparison in three lines."""
    f, q, a = result["float32"], result["int8"], result["int8_vs_float32"]
    return (f"{result['checkpoint']} test set, {result['n']} sentences, beam {result['beam']}: BLEU float32 "
            f"{f['bleu']:.2f}, int8 {q['bleu']:.2f} (drop {result['bleu_drop']:+.2f}; goal within 0.5: "
            f"{'met' if abs(result['bleu_drop']) <= 0.5 else 'MISSED'})\n"
            f"  int8 against float32's outputs: BLEU {a['bleu']:.2f}, identical {a['identical']}/{a['n']} "
            f"({100 * a['identical_share']:.1f}%)\n"
            f"  CPU seconds for the whole set: float32 {f['cpu_s']}, int8 {q['cpu_s']}")
