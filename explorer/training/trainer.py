"""The trainer: `python -m explorer train --run-dir runs/numbers --dataset numbers --preset tiny`.

One process (or one per rank under torchrun) that owns its run directory: it takes the lock,
writes status.json / metrics.jsonl, and saves whole checkpoints atomically with the state needed
to resume exactly (optimizer, step, RNG, data position). SIGTERM/SIGINT save and exit cleanly;
a non-finite loss stops the run as `failed` at the step where it happened. A batch this machine
cannot hold is refused before the first step, and a full disk ends the run as `failed` with the
reason in status.json.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch
from tqdm import tqdm

from explorer.config import TrainConfig, preset
from explorer.data import load_corpus
from explorer.data.encoded import encode_pairs
from explorer.evaluation.scores import evaluate_split
from explorer.files.atomic import DISK_FULL, recover, write_json_atomic
from explorer.model import Transformer
from explorer.runtime.device import resolve_device, training_kernels, training_optimizer
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.store.card import fine_tuned_card
from explorer.store.run_clearing import clear_run, is_marked, mark_run
from explorer.store.checkpoint import load_checkpoint, load_trainer_state, save_checkpoint
from explorer.training.distributed import Dist
from explorer.training.inputs import BatchPlan, prepare_tokenizer
from explorer.training.memory import check_batches
from explorer.training.notes import best_dev_text, warmup_note, zero_bleu_note
from explorer.training.saving import NO_BEST, check_room, prune_checkpoints, restore_state, resume_state
from explorer.training.schedule import noam_rate


class Trainer:
    def __init__(self, cfg: TrainConfig, resume: bool = False, overwrite: bool = False):
        self.cfg, self.run_dir = cfg, Path(cfg.run_dir)
        self.dist = Dist.from_env()
        self.device = resolve_device(cfg.device) if not self.dist.active else self.dist.device(cfg.device)
        self.stop_requested = False
        self.lock = rf.RunLock(self.run_dir)
        if self.dist.is_main and not self.lock.acquire():
            raise SystemExit(f"refused: another trainer holds {self.lock.path} "
                             f"(pid {self.lock.holder_pid() or '?'}); stop it first")
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        try:
            if overwrite and self.dist.is_main and is_marked(self.run_dir):   # under the lock: a running
                clear_run(self.run_dir)         # trainer's files are never removed; only what a trainer wrote
                                                # here, checked whole first (a new folder has nothing to clear)
            self._setup(resume)
        except BaseException as err:  # a setup failure is a readable status, and the lock is let go
            if self.dist.is_main:
                record_status(self.run_dir, state="failed", pid=os.getpid(),
                               last_error=f"{type(err).__name__}: {err}")
            self.lock.release()
            raise

    # ---- setup -------------------------------------------------------------------------
    def _setup(self, resume: bool) -> None:
        cfg = self.cfg
        init = load_checkpoint(cfg.init_from) if cfg.init_from else None
        self.corpus = load_corpus(cfg.dataset)
        if init is None:
            self.src_lang, self.tgt_lang = self.corpus.src_lang, self.corpus.tgt_lang
        else:
            self.src_lang = init.meta.get("src_lang", self.corpus.src_lang)
            self.tgt_lang = init.meta.get("tgt_lang", self.corpus.tgt_lang)
        # A fine-tune's checkpoints say what they derive from (an imported model's source and licence
        # would otherwise be lost one fine-tune later); a run from scratch writes no card.
        self.card = None if init is None else fine_tuned_card(
            init.card, str(cfg.init_from), data=cfg.dataset, parameters=init.model.num_parameters(),
            languages=(self.src_lang, self.tgt_lang) if self.src_lang and self.tgt_lang else None)
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            mark_run(self.run_dir)              # what lets a later --overwrite clear this run, and nothing else
            self.tokenizer = prepare_tokenizer(cfg, self.corpus, self.run_dir, init.tokenizer if init else None)
        self.dist.barrier()
        if not self.dist.is_main:
            self.tokenizer = prepare_tokenizer(cfg, self.corpus, self.run_dir, init.tokenizer if init else None)
        if init is not None:
            self.model_cfg = init.config
            if cfg.max_len > self.model_cfg.max_len:     # a longer sequence has no position in its table
                if self.dist.is_main:
                    print(f"note: sentences are cut to {self.model_cfg.max_len} pieces, the positions {cfg.init_from} "
                          f"has (--max-len {cfg.max_len} asked for more)", flush=True)
                self.cfg = cfg = replace(cfg, max_len=self.model_cfg.max_len)
        else:
            overrides = dict(src_vocab_size=self.tokenizer.src_vocab_size,
                             tgt_vocab_size=self.tokenizer.tgt_vocab_size, max_len=max(cfg.max_len, 64))
            if cfg.dropout is not None:
                overrides["dropout"] = cfg.dropout
            self.model_cfg = preset(cfg.preset, **overrides)
        self.train_split = encode_pairs(self.tokenizer, self.corpus.train, cfg.max_len, self.model_cfg.special)
        self.dev_split = encode_pairs(self.tokenizer, self.corpus.dev, cfg.max_len, self.model_cfg.special)
        self.plan = BatchPlan(self.train_split, cfg, self.dist.rank, self.dist.world)
        check_batches(cfg, self.plan, self.train_split, self.model_cfg, self.device, self.dist)  # before the model exists
        self.model = init.model if init is not None else Transformer(self.model_cfg)
        self.model.to(self.device).train()
        if cfg.bf16 and self.device.type == "cpu" and not _cpu_has_bf16() and self.dist.is_main:
            print("warning: --bf16 on a CPU without native bfloat16 (AVX512-BF16/AMX): bfloat16 matrix "
                  "products fall back to slow kernels (a training step ~12x slower than float32); use float32",
                  file=sys.stderr, flush=True)
        training_kernels(self.device)
        self.optimizer = training_optimizer(self.model.parameters())
        steps_per_epoch = self.plan.steps_per_epoch()
        self.total_steps = (math.ceil(cfg.epochs * steps_per_epoch) if cfg.epochs else cfg.max_steps)
        if self.dist.is_main and (note := warmup_note(self.total_steps, cfg.warmup)):
            print(f"warning: {note}", flush=True)            # the rate never reaches its peak: said, not silent
        if self.dist.is_main and (note := self.corpus.overlap_warning()):
            print(note, flush=True)            # dev loss and BLEU on memorised pairs: said
        self.step, self.epoch, self.batch_pos = 0, 0, 0
        self.best = dict(NO_BEST)
        if resume:
            self._restore()
            if self.dist.is_main:
                rf.drop_metrics_after(self.run_dir, self.step)
        self.train_model = self.dist.wrap(self.model)
        if self.dist.is_main:
            write_json_atomic(self.run_dir / rp.CONFIG, cfg.to_dict())

    def _restore(self) -> None:
        if self.dist.is_main:       # the run's only writer finishes what an interrupted save left
            for path in rp.checkpoint_dirs(self.run_dir):
                recover(path)       # a copy left aside mid-swap is renamed back; debris removed
        self.dist.barrier()
        ckpts = rp.checkpoint_dirs(self.run_dir)
        if not ckpts:
            raise SystemExit(f"--resume: no checkpoint in {self.run_dir / rp.CHECKPOINTS}")
        last = ckpts[-1]
        loaded = load_checkpoint(last, device=str(self.device))
        self.model.load_state_dict(loaded.model.state_dict())
        self.step, self.epoch, self.batch_pos, self.best = restore_state(
            load_trainer_state(last), self.optimizer, self.device)
        print(f"resumed from {last} at step {self.step} (epoch {self.epoch}, batch {self.batch_pos})", flush=True)

    # ---- loop --------------------------------------------------------------------------
    def _batches(self):
        """Yield (epoch, position, [micro-batch index lists]) from the saved data position on."""
        while True:
            batches = self.plan.epoch_batches(self.epoch)
            accum = self.cfg.accum_steps
            while self.batch_pos + accum <= len(batches):
                group = batches[self.batch_pos:self.batch_pos + accum]
                self.batch_pos += accum
                yield group
            self.epoch, self.batch_pos = self.epoch + 1, 0

    def _train_step(self, group: list[list[int]]) -> tuple[float, int, float]:
        cfg = self.cfg
        lr = noam_rate(self.step + 1, self.model_cfg.d_model, cfg.lr_factor, cfg.warmup)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        micro = [self.plan.tensors(ix, self.device) for ix in group]
        n_target = sum(int((tgt_out != self.model_cfg.pad_id).sum()) for _, _, tgt_out in micro)
        total_loss, total_tokens = 0.0, 0
        for i, (src, tgt_in, tgt_out) in enumerate(micro):
            # Under DDP, gradients are all-reduced once per step: on the last micro-batch only.
            last = i == len(micro) - 1
            with (nullcontext() if last or not self.dist.active else self.train_model.no_sync()):
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
                    # summed label-smoothed loss of the non-pad targets (Transformer.loss)
                    loss = self.train_model(src, tgt_in, targets=tgt_out, label_smoothing=cfg.label_smoothing)
                (loss / max(n_target, 1)).backward()
            total_loss += float(loss.detach())
            total_tokens += int((src != self.model_cfg.pad_id).sum())
        total_tokens += n_target
        # Every rank sees the same totals, so a NaN or a stop request ends all ranks at the same step.
        total_loss, n_target, total_tokens, stops = self.dist.all_sum(
            [total_loss, n_target, total_tokens, float(self.stop_requested)], self.device)
        self.stop_requested = stops > 0
        loss_value = total_loss / max(n_target, 1)
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"non-finite loss ({loss_value}) at step {self.step + 1}")
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.optimizer.step()
        self.step += 1
        return loss_value, int(total_tokens), lr

    def run(self) -> int:
        cfg, main = self.cfg, self.dist.is_main
        self._install_signals()
        bar = _progress(self.total_steps, self.step, main)
        t0, tokens_since, last_log, window = time.time(), 0, time.time(), []
        try:
            if main:
                rf.write_status(self.run_dir, state="running", pid=os.getpid(), step=self.step,
                                total_steps=self.total_steps, epoch=self.epoch, last_error=None,
                                started=time.time(), updated=time.time(), device=str(self.device))
            check_room(self.run_dir, self.model_cfg)
            state = "finished"
            for group in self._batches():
                if self.step >= self.total_steps:
                    break
                loss, ntok, lr = self._train_step(group)
                tokens_since += ntok
                window.append(loss)
                bar.update(1)
                if main and (self.step % cfg.log_every == 0 or self.step == self.total_steps):
                    now = time.time()
                    rec = {"kind": "train", "step": self.step, "epoch": self.epoch + self.batch_pos / max(
                        1, len(self.plan.epoch_batches(self.epoch))), "loss": sum(window) / len(window),
                           "lr": lr, "tokens_per_s": tokens_since / max(now - last_log, 1e-9),
                           "elapsed": now - t0}
                    rec["ppl"] = math.exp(min(rec["loss"], 50))
                    rf.append_metrics(self.run_dir, rec)
                    rf.write_status(self.run_dir, step=self.step, epoch=rec["epoch"], updated=now)
                    bar.set_postfix(loss=f"{rec['loss']:.3f}", tok_s=f"{rec['tokens_per_s']:.0f}")
                    tokens_since, last_log, window = 0, now, []
                if cfg.eval_every and self.step % cfg.eval_every == 0:
                    self._evaluate()
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self._save()
                if self.stop_requested:
                    state = "stopped"
                    break
            if state == "finished" and cfg.eval_every and self.step % cfg.eval_every != 0:
                self._evaluate()
            self._save()                  # inside the try: a full disk at the last save fails the run too
        except (FloatingPointError, OSError) as err:
            if isinstance(err, FloatingPointError):
                message = str(err)
            elif err.errno in DISK_FULL:
                message = f"disk full: {err}; free space in {self.run_dir}, then resume from the last checkpoint"
            else:
                message = f"{type(err).__name__}: {err}"
            if main:
                extra = {"failed_step": self.step + 1} if isinstance(err, FloatingPointError) else {}
                record_status(self.run_dir, state="failed", step=self.step, last_error=message,
                               updated=time.time(), **extra)
            print(f"failed: {message}", file=sys.stderr, flush=True)
            self._close()
            return 1
        finally:
            bar.close()
        spread = self.dist.weight_spread(self.model)
        if main:
            rf.write_status(self.run_dir, state=state, step=self.step, updated=time.time())
            if self.dist.active:
                print(f"DDP: {self.dist.world} ranks, largest weight difference between ranks {spread:.3g}"
                      + (" (identical)" if spread == 0 else " (WARNING: ranks diverged)"), flush=True)
            print(self._summary(state, time.time() - t0), flush=True)
        self._close()
        return 0

    def _summary(self, state: str, seconds: float) -> str:
        """The log's last line: where the run stopped, its best dev scores (notes.best_dev_text: a best BLEU
        of 0 beside chrF says why), and its directory."""
        best = self.best
        scores = "" if best["step"] is None else best_dev_text(
            best["bleu"], best["step"], best.get("chrf"), best.get("chrf_step"),
            self.dev_split.tgt_text[:self.cfg.eval_sentences]) + ", "
        return (f"{state}: step {self.step}/{self.total_steps}, epoch {self.epoch}, {seconds:.0f}s, {scores}"
                f"run dir {self.run_dir}")

    def _close(self) -> None:
        self.dist.cleanup()
        self.lock.release()

    # ---- eval / save -------------------------------------------------------------------
    def _evaluate(self) -> None:
        if not self.dist.is_main:
            self.dist.barrier()
            return
        self.model.eval()
        res = evaluate_split(self.model, self.tokenizer, self.dev_split, self.cfg.eval_sentences,
                             device=self.device, tgt_lang=self.tgt_lang)
        self.model.train()
        rec = {"kind": "eval", "step": self.step, "epoch": self.epoch, **res}
        rf.append_metrics(self.run_dir, rec)
        if res["bleu"] > self.best["bleu"]:
            self.best.update(bleu=res["bleu"], step=self.step)
        if self.best["chrf"] is None or res["chrf"] > self.best["chrf"]:
            self.best.update(chrf=res["chrf"], chrf_step=self.step)
        print(f"eval step {self.step}: dev loss {res['dev_loss']:.3f} BLEU {res['bleu']:.2f} "
              f"chrF {res['chrf']:.2f} exact {res['exact']:.3f}", flush=True)
        if note := zero_bleu_note(res["bleu"], res["chrf"], self.dev_split.tgt_text[:res["n"]]):
            print(f"note: {note}", flush=True)                # BLEU 0 beside chrF 100: short sentences
        self.dist.barrier()

    def _save(self) -> None:
        if not self.dist.is_main:
            return
        check_room(self.run_dir, self.model_cfg)
        state = resume_state(self.step, self.epoch, self.batch_pos, self.optimizer, self.best, self.device)
        path = rp.checkpoint_dir(self.run_dir, self.step)
        meta = {"name": f"{self.run_dir.name}@{self.step}", "src_lang": self.src_lang, "tgt_lang": self.tgt_lang,
                "training": {"step": self.step, "epoch": self.epoch, "dataset": self.cfg.dataset,
                             "corpus": self.corpus.name,
                             "preset": self.cfg.preset, "init_from": self.cfg.init_from,
                             "best_dev_bleu": self.best["bleu"], "best_step": self.best["step"],
                             "run": self.run_dir.name, "warmup": self.cfg.warmup, "lr_factor": self.cfg.lr_factor,
                             "last_lr": noam_rate(self.step, self.model_cfg.d_model, self.cfg.lr_factor,
                                                  self.cfg.warmup)}}
        save_checkpoint(path, self.model, self.tokenizer, meta=meta, dtype=torch.float32, trainer_state=state,
                        card=self.card)
        prune_checkpoints(self.run_dir, self.cfg.keep_last, self.best["step"])
        rf.write_status(self.run_dir, last_checkpoint=str(path), best_step=self.best["step"])

    def _install_signals(self) -> None:
        def request_stop(signum, frame):
            self.stop_requested = True
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)


def record_status(run_dir: Path, **fields) -> None:
    """write_status on the way out of a failure. A disk too full even for an in-place rewrite gets
    one line on stderr (the failure itself is reported by the caller), not a second traceback."""
    try:
        rf.write_status(run_dir, **fields)
    except OSError as err:
        print(f"error: cannot record state {fields.get('state')!r} in {Path(run_dir) / rp.STATUS}: "
              f"{err.strerror or err}", file=sys.stderr, flush=True)


def _cpu_has_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _progress(total: int, initial: int, enabled: bool):
    return tqdm(total=total, initial=initial, disable=not enabled, unit="step", dynamic_ncols=True,
                mininterval=2.0, file=sys.stderr)
