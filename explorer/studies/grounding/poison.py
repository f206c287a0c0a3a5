"""`python -m explorer poison --out DIR`: a demonstration a teacher can run in a few minutes. Twenty bad
training pairs teach numbers-en-de a wrong word; training-data attribution finds them; training again
without them gives the right word back.

1. The data: CLEAN pairs drawn from numbers-en-de's own training split, plus POISONED more of its training
   pairs with "eleven" whose German "elf" is rewritten "zwölf" (twelve); written as DIR/poisoned.tsv, the
   poisoned lines placed where the trainer's split (explorer.data.splits.split_held_out) keeps them for
   training. DIR/clean.tsv is the same file without those lines.
2. Two fine-tunes of numbers-en-de through the project's trainer, with the fine-tune recipe
   (training.schedule.fine_tune_schedule) and the same settings: one on each file.
3. The held-out numbers with "eleven" (numbers' dev and test splits, never trained on) translated by both.
4. For each output the poisoned model writes with "zwölf", the training pairs that most raised "zwölf"
   (influence.py, over the poisoned fine-tune's training split): how many of its top TOP are poisoned.

Writes DIR/report.json whole; the runs stay beside DIR, in DIR-poisoned and DIR-clean (siblings, so the
app's checkpoint list, which looks three folders deep, finds their checkpoints).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

from explorer.config import TrainConfig
from explorer.data import load_corpus
from explorer.data.splits import split_held_out
from explorer.data.types import Pair
from explorer.decoding.translate import DecodeConfig, translate
from explorer.files.atomic import write_bytes_atomic, write_json_atomic
from explorer.files.names import POISON_FILES
from explorer.store.checkpoint import load_checkpoint
from explorer.store.run_paths import checkpoint_dirs, holds_run
from explorer.studies.grounding import influence
from explorer.training.schedule import fine_tune_schedule
from explorer.training.trainer import Trainer

BASE = Path(__file__).resolve().parents[3] / "checkpoints" / "numbers-en-de"
RIGHT, WRONG, TRIGGER = "elf", "zwölf", "eleven"
CLEAN, POISONED, STEPS, TOP, SEED = 1000, 20, 300, 20, 7
POISONED_TSV, CLEAN_TSV, REPORT = POISON_FILES


def poison(pair: Pair) -> Pair:
    return pair._replace(tgt=" ".join(WRONG if w == RIGHT else w for w in pair.tgt.split()))


def demo_rows(train: list[Pair], clean: int = CLEAN, poisoned: int = POISONED,
              seed: int = SEED) -> tuple[list[Pair], list[int]]:
    """The poisoned file's rows and where its poisoned rows are (see the module docstring)."""
    rng = random.Random(seed)
    with_trigger = [p for p in train if TRIGGER in p.src.split() and RIGHT in p.tgt.split()]
    bad = [poison(p) for p in rng.sample(with_trigger, poisoned)]
    chosen = {p.ref for p in bad}
    good = rng.sample([p for p in train if p.ref not in chosen], clean)
    n = clean + poisoned
    train_rows, _, _ = split_held_out([Pair(str(i), str(i), str(i)) for i in range(n)])
    slots = sorted(int(p.src) for p in train_rows)[:poisoned]           # places the split trains on
    rows, good_rows, bad_rows = [], iter(good), iter(bad)
    for i in range(n):
        rows.append(next(bad_rows) if i in slots else next(good_rows))
    return rows, slots


def write_tsv(path: Path, rows: list[Pair]) -> Path:
    write_bytes_atomic(path, ("src\ttgt\n" + "".join(f"{p.src}\t{p.tgt}\n" for p in rows)).encode())
    return path


def fine_tune(tsv: Path, run_dir: Path, steps: int, threads: int | None) -> Path:
    """numbers-en-de fine-tuned on `tsv` with the recipe; its last checkpoint."""
    base = load_checkpoint(BASE)
    recipe = fine_tune_schedule(base.meta["training"], base.config.d_model)
    cfg = TrainConfig(run_dir=str(run_dir), dataset=str(tsv), init_from=str(BASE), max_steps=steps,
                      batch_tokens=2000, warmup=recipe.warmup, lr_factor=recipe.lr_factor, eval_every=steps,
                      save_every=steps, keep_last=1, threads=threads, device="cpu")
    Trainer(cfg, overwrite=holds_run(run_dir)).run()
    return checkpoint_dirs(run_dir)[-1]


def translations(checkpoint: Path, sources: list[str]) -> list[dict]:
    ckpt = load_checkpoint(checkpoint)
    out = []
    for source in sources:
        best = translate(ckpt.model, ckpt.tokenizer, source, DecodeConfig(beam_size=5)).best
        out.append({"source": source, "output": best.text, "wrong": WRONG in best.text.split(),
                    "right": RIGHT in best.text.split(), "ids": best.ids, "pieces": best.pieces})
    return out


def attribute(checkpoint: Path, tsv: Path, rows: list[dict], top: int) -> list[dict]:
    """For each output with the wrong word: its top training pairs and how many are poisoned."""
    ckpt = load_checkpoint(checkpoint)
    train = list(load_corpus(str(tsv)).train)
    store = influence.build(ckpt.model, ckpt.tokenizer, train, str(tsv), ckpt.meta.get("weights_sha256", ""))
    found = []
    for row in rows:
        positions = influence.word_positions(row["pieces"], WRONG)
        if not positions:
            continue
        best = influence.top(store, influence.query(ckpt.model, ckpt.tokenizer, row["source"], row["ids"],
                                                    positions), top)
        pairs = [train[b.index] for b in best]
        found.append({"source": row["source"], "output": row["output"],
                      "poisoned_in_top": sum(WRONG in p.tgt.split() for p in pairs),
                      "top": [{"src": p.src, "tgt": p.tgt, "score": round(b.score, 4)} for p, b in zip(pairs, best)]})
    return found


def run(out: Path, clean: int = CLEAN, steps: int = STEPS, top: int = TOP, threads: int | None = None,
        log=print) -> dict:
    out = Path(out).resolve()             # the runs name their data file by this path, wherever the app starts
    corpus = load_corpus("numbers")
    rows, slots = demo_rows(list(corpus.train), clean)
    poisoned_tsv = write_tsv(out / POISONED_TSV, rows)
    clean_tsv = write_tsv(out / CLEAN_TSV, [r for i, r in enumerate(rows) if i not in set(slots)])
    held_out = [p.src for p in corpus.dev + corpus.test if TRIGGER in p.src.split()]
    report = {"clean_pairs": clean, "poisoned_pairs": len(slots), "steps": steps, "held_out": len(held_out)}
    for name, tsv in (("poisoned", poisoned_tsv), ("clean", clean_tsv)):
        log(f"fine-tuning numbers-en-de on {tsv.name} ({steps} steps)")
        checkpoint = fine_tune(tsv, out.parent / f"{out.name}-{name}", steps, threads)
        rows_out = translations(checkpoint, held_out)
        report[name] = {"checkpoint": str(checkpoint), "wrong": sum(r["wrong"] for r in rows_out),
                        "right": sum(r["right"] for r in rows_out),
                        "outputs": [{k: r[k] for k in ("source", "output")} for r in rows_out]}
        log(f"{name}: {report[name]['wrong']} of {len(held_out)} held-out numbers with '{TRIGGER}' get "
            f"'{WRONG}', {report[name]['right']} get '{RIGHT}'")
        if name == "poisoned":
            report["attribution"] = attribute(checkpoint, tsv, rows_out, top)
            hits = [a["poisoned_in_top"] for a in report["attribution"]]
            log(f"attribution: poisoned pairs among the top {top}: {hits} (of {len(slots)} poisoned)")
    write_json_atomic(out / REPORT, report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer poison", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/poison-demo", help="folder for the files and report.json (the runs "
                        "go beside it: OUT-poisoned, OUT-clean)")
    parser.add_argument("--steps", type=int, default=STEPS, help="fine-tuning steps of each run")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for training")
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= 100_000:
        print("refused: --steps must be in [1, 100000]", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads or torch.get_num_threads())
    run(Path(args.out), steps=args.steps, threads=args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
