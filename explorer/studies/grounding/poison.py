"""`python -m explorer poison [--out DIR]`: a demonstration a teacher can run in a few minutes. Twenty bad
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

Where it writes: everything goes inside DIR (default poison-demo in the runs folder, runs/ or
$EXPLORER_RUNS_DIR: explorer.store.run_paths.runs_root): DIR/poisoned.tsv, DIR/clean.tsv, the two runs
DIR/poisoned/ and DIR/clean/ (run folders as `python -m explorer train` writes them), and DIR/report.json,
written whole and last. Nothing is written anywhere else (the attribution's gradients stay in memory).
DIR must be new, empty, or an earlier output of this command (only the names above, the runs written by
this project's trainer): an earlier output is started over, its report removed first. Anything else (an
empty name, a file, a checkpoint or run folder, a folder holding other files, the working directory or
one holding it) is refused in one `error: ...` line, exit status 2, before any work.

A fine-tune that does not finish (Ctrl-C or SIGTERM stops the trainer, which saves and exits cleanly)
ends the command there: one `stopped: ...` line, exit status 130, no report (the files and runs so far
stay, and the next run over DIR starts over). Ctrl-C anywhere else is the same one line; a fine-tune that
fails is one `error: ...` line and exit status 1. No file is ever left half-written (explorer.files.atomic).
"""
from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
from pathlib import Path

import torch

from explorer.config import TrainConfig
from explorer.data import DataError, load_corpus
from explorer.data.splits import split_held_out
from explorer.data.types import Pair
from explorer.decoding.translate import DecodeConfig, translate
from explorer.evaluation.arguments import ArgumentsError, CommandParser, count
from explorer.files import names
from explorer.files.atomic import write_bytes_atomic, write_json_atomic
from explorer.files.names import POISON_FILES
from explorer.files.user_files import UserFileError
from explorer.store import run_files as rf
from explorer.store.checkpoint import CheckpointError, load_checkpoint
from explorer.store.run_clearing import RunRefused, never_started
from explorer.store.run_paths import RUNS_ENV, checkpoint_dirs, holds_run, step_of
from explorer.studies.common.command import refuse
from explorer.studies.grounding import influence
from explorer.studies.grounding.poison_out import DEFAULT_OUT, OutRefused, check_out, default_out
from explorer.training.args import MAX_THREADS
from explorer.training.memory import SetupRefused
from explorer.training.schedule import fine_tune_schedule
from explorer.training.trainer import Trainer

BASE = Path(__file__).resolve().parents[3] / "checkpoints" / "numbers-en-de"
RIGHT, WRONG, TRIGGER = "elf", "zwölf", "eleven"
CLEAN, POISONED, STEPS, TOP, SEED = 1000, 20, 300, 20, 7
POISONED_TSV, CLEAN_TSV, REPORT = POISON_FILES
MAX_STEPS = 100_000
STOPPED = 130                           # the exit status of a command stopped by Ctrl-C (128 + SIGINT)


class Stopped(Exception):
    """A fine-tune that ended before it finished (Ctrl-C or SIGTERM stopped the trainer)."""


class FineTuneFailed(Exception):
    """A fine-tune that could not start or ended as failed; the message says why."""


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


def _signal_handlers() -> dict:
    """SIGINT's and SIGTERM's handlers now (the trainer installs its own and leaves them installed)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore_signal_handlers(handlers: dict) -> None:
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def fine_tune(tsv: Path, run_dir: Path, steps: int, threads: int | None) -> Path:
    """numbers-en-de fine-tuned on `tsv` with the recipe; its checkpoint of the last step. Stopped when the
    trainer was stopped (Ctrl-C, SIGTERM: it saves and returns), FineTuneFailed when it could not start
    or did not finish; Ctrl-C's usual KeyboardInterrupt is back once the trainer returns."""
    base = load_checkpoint(BASE)
    recipe = fine_tune_schedule(base.meta["training"], base.config.d_model)
    cfg = TrainConfig(run_dir=str(run_dir), dataset=str(tsv), init_from=str(BASE), max_steps=steps,
                      batch_tokens=2000, warmup=recipe.warmup, lr_factor=recipe.lr_factor, eval_every=steps,
                      save_every=steps, keep_last=1, threads=threads, device="cpu")
    if never_started(run_dir):
        (run_dir / names.RUN_STATUS).unlink(missing_ok=True)
    handlers = _signal_handlers()
    try:
        try:
            trainer = Trainer(cfg, overwrite=holds_run(run_dir))
        except SystemExit as err:                       # another trainer holds the run's lock
            raise FineTuneFailed(str(err.code)) from None
        code = trainer.run()
    finally:
        _restore_signal_handlers(handlers)
    status = rf.read_status(run_dir)
    state, step = status.get("state"), status.get("step", getattr(trainer, "step", "?"))
    if state == "stopped":
        raise Stopped(f"the fine-tune in {run_dir} stopped at step {step} of {steps}")
    if code != 0 or state != "finished":
        raise FineTuneFailed(f"the fine-tune in {run_dir} ended as {state or 'unknown'} at step {step} of {steps}"
                             + (f": {status['last_error']}" if status.get("last_error") else ""))
    last = checkpoint_dirs(run_dir)
    if not last or step_of(last[-1]) != steps:
        raise FineTuneFailed(f"the fine-tune in {run_dir} finished without a checkpoint of step {steps}")
    return last[-1]


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
    """The demonstration in `out` (checked first by check_out; see the module docstring): its report,
    also written as out/report.json. Stopped or FineTuneFailed from a fine-tune, and then no report."""
    out = Path(out).resolve()             # the runs name their data file by this path, wherever the app starts
    (out / REPORT).unlink(missing_ok=True)    # an earlier output's report never describes these runs
    corpus = load_corpus("numbers")
    rows, slots = demo_rows(list(corpus.train), clean)
    poisoned_tsv = write_tsv(out / POISONED_TSV, rows)
    clean_tsv = write_tsv(out / CLEAN_TSV, [r for i, r in enumerate(rows) if i not in set(slots)])
    held_out = [p.src for p in corpus.dev + corpus.test if TRIGGER in p.src.split()]
    report = {"clean_pairs": clean, "poisoned_pairs": len(slots), "steps": steps, "held_out": len(held_out)}
    for name, tsv in (("poisoned", poisoned_tsv), ("clean", clean_tsv)):
        log(f"fine-tuning numbers-en-de on {tsv.name} ({steps} steps)")
        checkpoint = fine_tune(tsv, out / name, steps, threads)
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


def build_parser() -> CommandParser:
    parser = CommandParser(prog="python -m explorer poison", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="a new folder for the files, the two runs and report.json "
                        f"(default {DEFAULT_OUT} in the runs folder: runs/ or ${RUNS_ENV})")
    parser.add_argument("--steps", type=count("steps", 1, MAX_STEPS), default=STEPS,
                        help=f"fine-tuning steps of each run (default {STEPS}, at most {MAX_STEPS:,})")
    parser.add_argument("--threads", type=count("threads", 1, MAX_THREADS), default=None,
                        help=f"CPU threads for training (at most {MAX_THREADS}; default torch's)")
    return parser


def _stopped(what: str) -> int:
    print(f"stopped: {what}; nothing was reported", file=sys.stderr, flush=True)
    return STOPPED


def main(argv: list[str] | None = None) -> int:
    """The command: 0 with the report written, 2 for a refused argument (before any work), 130 when
    stopped, 1 when a fine-tune or a file could not be done; one line on stderr for each but 0."""
    try:
        args = build_parser().parse_args(argv)
        out = check_out(str(default_out()) if args.out is None else args.out)
    except (ArgumentsError, OutRefused) as err:
        return refuse(str(err))
    except KeyboardInterrupt:
        return _stopped("interrupted before anything was written")
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        run(out, steps=args.steps, threads=args.threads)
    except Stopped as err:
        return _stopped(str(err))
    except KeyboardInterrupt:
        return _stopped("interrupted")
    except (FineTuneFailed, CheckpointError, DataError, SetupRefused, RunRefused, UserFileError, OSError) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    print(f"written: {out / REPORT}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
