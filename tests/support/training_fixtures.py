"""Run directories for the training/checkpoint tests, built in tmp_path without running a trainer.

A real word tokenizer (trained on 300 number pairs in well under a second) and tiny models saved
with the real save_checkpoint, so loading, scoring and tracing go through the library as the app
uses it. `build_runs` lays out one run per state the app must render: finished (two checkpoints,
metrics, samples), running (a helper process holds the trainer lock), failed (last error), killed
(status "running", nobody holds the lock) and damaged (garbage status.json, a torn metrics line,
a checkpoint whose safetensors file is cut short).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.checkpoint import save_checkpoint
from explorer.config import TrainConfig, preset
from explorer.data.files import read_tsv
from explorer.model import Transformer
from explorer.text.tokenizer import Tokenizer

REPO = Path(__file__).resolve().parents[2]
SENTENCE = "three hundred and twenty one"


def numbers_test_tsv() -> Path:
    """The numbers corpus' test split, in the tests' corpus cache (built by explorer.data on first use)."""
    from explorer.data.splits import default_data_dir

    path = Path(default_data_dir()) / "numbers" / "test.tsv"
    if not path.is_file():
        from explorer.data import load_corpus
        load_corpus("numbers")
    return path


def numbers_pairs(n: int = 300):
    return read_tsv(str(numbers_test_tsv()))[:n]


def make_tokenizer(directory: Path) -> Tokenizer:
    pairs = numbers_pairs()
    return Tokenizer.train([p.src for p in pairs], [p.tgt for p in pairs], str(directory), vocab_size=200,
                           model_type="word", joint=True)


def make_model(tokenizer: Tokenizer, seed: int, **overrides) -> Transformer:
    torch.manual_seed(seed)
    cfg = preset("tiny", src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size,
                 max_len=64, dropout=0.0, **overrides)
    return Transformer(cfg).eval()


def perturbed(model: Transformer, scale: float, seed: int) -> Transformer:
    """A copy whose weights moved by ~scale (a stand-in for more training)."""
    other = Transformer(model.cfg).eval()
    other.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return other


def save_step(run_dir: Path, step: int, model: Transformer, tokenizer: Tokenizer, test_tsv: bool = True) -> Path:
    meta = {"name": f"{run_dir.name}@{step}", "src_lang": "en", "tgt_lang": "de",
            "training": {"step": step, "epoch": 0, "dataset": "numbers", "preset": "tiny", "run": run_dir.name}}
    path = save_checkpoint(run_dir / rp.CHECKPOINTS / f"step_{step:06d}", model, tokenizer, meta=meta)
    if test_tsv:
        shutil.copyfile(numbers_test_tsv(), path / "test.tsv")
    return path


def write_run(run_dir: Path, status: dict | str, metrics: list[dict] | str = "", log: str = "") -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = TrainConfig(run_dir=str(run_dir), dataset="numbers", preset="tiny", tokenizer_type="word", max_steps=20,
                      warmup=10, lr_factor=0.5, eval_every=10, save_every=10, threads=1)
    write_json_atomic(run_dir / rp.CONFIG, cfg.to_dict())
    (run_dir / rp.STATUS).write_text(status if isinstance(status, str) else json.dumps(status))
    text = metrics if isinstance(metrics, str) else "".join(json.dumps(m) + "\n" for m in metrics)
    (run_dir / rp.METRICS).write_text(text)
    (run_dir / rp.LOG).write_text(log)
    return run_dir


def train_records(steps, lr0: float = 1e-3) -> list[dict]:
    return [{"kind": "train", "step": s, "epoch": 0.0, "loss": 4.0 / s ** 0.5, "ppl": 2.7, "lr": lr0 * s,
             "tokens_per_s": 5000.0, "elapsed": 0.5 * s} for s in steps]


def eval_record(step: int, bleu: float) -> dict:
    return {"kind": "eval", "step": step, "epoch": 0, "dev_loss": 2.0, "dev_ppl": 7.4, "bleu": bleu, "chrf": 30.0,
            "exact": 0.0, "n": 5, "samples": [{"src": SENTENCE, "ref": "drei hundert ein und zwanzig",
                                              "hyp": f"hyp at {step}"}]}


def hold_lock(run_dir: Path) -> subprocess.Popen:
    """A process that holds run_dir's trainer.lock like a live trainer (SIGTERM ends it), for as long as the
    test process lives: it waits on a pipe from it, not on a clock (it slept 300 s, after which a slow
    machine's "running" run quietly stopped running), and the pipe closes when the tests end, however."""
    code = ("import fcntl, os, sys\n"
            f"fd = os.open({str(run_dir / rp.LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nos.ftruncate(fd, 0)\nos.write(fd, str(os.getpid()).encode())\n"
            "print('locked', flush=True)\nsys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def build_runs(root: Path) -> dict:
    """All the run directories the app tests render; returns names, paths and the lock holder."""
    tok = make_tokenizer(root / ".tok")
    a = make_model(tok, seed=1)
    b = perturbed(a, 0.02, seed=2)
    finished = write_run(root / "finished", {"state": "finished", "pid": 1, "step": 20, "total_steps": 20,
                                             "started": time.time() - 60, "updated": time.time(), "last_error": None},
                         train_records(range(10, 21, 10)) + [eval_record(10, 5.0), eval_record(20, 12.5)],
                         "finished: step 20/20\n")
    ck10, ck20 = save_step(finished, 10, a, tok), save_step(finished, 20, b, tok, test_tsv=False)
    running = write_run(root / "running", {"state": "running", "step": 10, "total_steps": 100,
                                           "started": time.time() - 30, "updated": time.time()},
                        train_records(range(10, 11, 10)), "  10%|# | 10/100 [00:05<00:45]\r")
    holder = hold_lock(running)
    rf.write_status(running, pid=holder.pid)
    failed = write_run(root / "failed", {"state": "failed", "step": 7, "total_steps": 20,
                                         "last_error": "non-finite loss (nan) at step 7", "started": time.time() - 90},
                       train_records([5]), "failed: non-finite loss (nan) at step 7\n")
    killed = write_run(root / "killed", {"state": "running", "pid": 999_999, "step": 10, "total_steps": 20,
                                         "started": time.time() - 120}, train_records([10]))
    save_step(killed, 10, a, tok, test_tsv=False)
    damaged = write_run(root / "damaged", "{garbage", json.dumps(train_records([10])[0]) + "\n{\"kind\": \"tra")
    bad = save_step(damaged, 5, a, tok, test_tsv=False)
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: os.path.getsize(weights) // 2])
    (damaged / rp.CONFIG).write_text("not json")
    return {"root": root, "tokenizer": tok, "model_a": a, "model_b": b, "ck10": ck10, "ck20": ck20,
            "holder": holder, "finished": finished, "running": running, "failed": failed, "killed": killed,
            "damaged": damaged}
