"""The trainer's limits, checked without a trainer: settings it cannot hold are refused up front with a
message (train_args.parse_config / validate, and train.main's exit 2 before it makes a run directory), the
per-step memory estimate and the available-memory reading (training.memory), status.json written on a
full disk (run_files), and checkpoint listing after a save killed mid-swap (run_paths).

Nothing here starts a trainer process, trains a model or reads a corpus. The end-to-end half (real
trainer runs, faults injected into its process, refusals on the shared numbers tokenizer) is in
tests/integration/test_train_limits.py.
"""
from __future__ import annotations

import errno
import json
import os

import pytest

from explorer.files import atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.training import memory
from explorer import train
from explorer.training import args as train_args
from explorer.config import TrainConfig
from explorer.training.args import parse_config, validate


# ---- non-finite and absurd numbers ------------------------------------------------------------------
@pytest.mark.parametrize("content, flags, message", [
    ({}, ["--epochs", "inf"], "epochs must be a finite number, not inf"),
    ({"epochs": float("inf")}, [], "epochs must be a finite number, not inf"),
    ({}, ["--epochs", "nan"], "epochs must be a finite number, not nan"),
    ({"lr_factor": float("nan")}, [], "lr_factor must be a finite number, not nan"),
    ({}, ["--lr-factor", "inf"], "lr_factor must be a finite number, not inf"),
    ({"label_smoothing": float("nan")}, [], "label_smoothing must be a finite number, not nan"),
    ({}, ["--dropout", "nan"], "dropout must be a finite number, not nan"),
    ({}, ["--clip-norm", "inf"], "clip_norm must be a finite number, not inf"),
])
def test_non_finite_numbers_are_refused(tmp_path, content, flags, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))                  # json writes NaN / Infinity, and reads them back
    with pytest.raises(ValueError) as err:
        parse_config(["--run-dir", str(tmp_path / "run"), "--config", str(path), *flags])
    assert message in str(err.value)


def test_epochs_inf_exits_2_with_the_reason_not_a_traceback(tmp_path, capsys):
    """It used to pass validate and end in OverflowError (ceil of inf) inside the trainer."""
    code = train.main(["--run-dir", str(tmp_path / "run"), "--dataset", "numbers", "--tokenizer-type", "word",
                       "--threads", "1", "--epochs", "inf"])
    assert code == 2
    assert "epochs must be a finite number, not inf" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_finite_floats_still_pass():
    validate(TrainConfig(epochs=2.5, lr_factor=0.5, label_smoothing=0.0, dropout=0.3, clip_norm=0.0))


def test_absurd_epochs_are_refused():
    from explorer.training.args import MAX_EPOCHS
    validate(TrainConfig(epochs=float(MAX_EPOCHS)))
    with pytest.raises(ValueError, match="epochs must be <= "):
        validate(TrainConfig(epochs=1e300))


# ---- upper limits (train_args) ----------------------------------------------------------------------
@pytest.mark.parametrize("field, limit", [
    ("max_steps", "MAX_STEPS"), ("batch_tokens", "MAX_BATCH_TOKENS"), ("accum_steps", "MAX_ACCUM_STEPS"),
    ("max_len", "MAX_SEQ_LEN"), ("vocab_size", "MAX_VOCAB_SIZE"), ("keep_last", "MAX_KEEP_LAST"),
    ("threads", "MAX_THREADS"), ("warmup", "MAX_STEPS"),
])
def test_upper_limits_are_named_constants_and_enforced(field, limit):
    value = getattr(train_args, limit)
    validate(TrainConfig(**{field: value}))                               # the limit itself is allowed
    with pytest.raises(ValueError, match=f"^{field} must be <= {value:,}, not {value + 1:,}$"):
        validate(TrainConfig(**{field: value + 1}))


def test_seed_outside_what_torch_accepts_is_refused():
    low, high = train_args.SEED_RANGE
    validate(TrainConfig(seed=low))
    validate(TrainConfig(seed=high))
    for seed in (low - 1, high + 1):
        with pytest.raises(ValueError, match="seed must be in"):
            validate(TrainConfig(seed=seed))


def test_batch_tokens_1e12_exits_2_at_once(tmp_path, capsys):
    code = train.main(["--run-dir", str(tmp_path / "run"), "--dataset", "numbers", "--tokenizer-type", "word",
                       "--threads", "1", "--max-steps", "1", "--batch-tokens", str(10 ** 12)])
    assert code == 2
    assert "batch_tokens must be <= 1,000,000, not 1,000,000,000,000" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# ---- the memory check (training.memory, Trainer setup) --------------------------------------
def test_step_memory_estimate_refuses_1e12_and_fits_the_defaults():
    from explorer.config import preset

    cfg = TrainConfig()
    model_cfg = preset(cfg.preset, src_vocab_size=cfg.vocab_size, tgt_vocab_size=cfg.vocab_size)
    huge = memory.step_memory_bytes(model_cfg, tokens=10 ** 12, seq_len=cfg.max_len)   # arithmetic only
    assert huge > 2 ** 50                                                   # petabytes: no machine has them
    default = memory.step_memory_bytes(model_cfg, tokens=cfg.batch_tokens, seq_len=cfg.max_len)
    assert 2 ** 27 < default < 1.5 * 2 ** 30          # the defaults (worst-case sentence length) fit a laptop
    # each term grows with what it counts
    assert memory.step_memory_bytes(model_cfg, tokens=8000, seq_len=25) > \
        memory.step_memory_bytes(model_cfg, tokens=4000, seq_len=25)
    bigger_vocab = preset(cfg.preset, src_vocab_size=30000, tgt_vocab_size=30000)
    assert memory.step_memory_bytes(bigger_vocab, tokens=4000, seq_len=25) > \
        memory.step_memory_bytes(model_cfg, tokens=4000, seq_len=25)


def test_available_memory_is_the_systems_or_none(monkeypatch):
    """The CPU's free memory as psutil reads it on any OS (it read Linux's /proc/meminfo alone: the check
    was skipped elsewhere); when the system does not say, None, and the check is skipped."""
    import psutil
    import torch
    cpu = torch.device("cpu")
    found = memory.available_memory_bytes(cpu)
    assert found is not None and 0 < found <= psutil.virtual_memory().total
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("Memory", (), {"available": 2 * 2 ** 30})())
    assert memory.available_memory_bytes(cpu) == 2 * 2 ** 30

    def unreadable():
        raise psutil.AccessDenied()
    monkeypatch.setattr(psutil, "virtual_memory", unreadable)
    assert memory.available_memory_bytes(cpu) is None
    assert memory.available_memory_bytes(torch.device("meta")) is None


# ---- a full disk --------------------------------------------------------------------------------------
def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_status_write_on_a_full_disk_rewrites_the_file_in_place(tmp_path, monkeypatch):
    rf.write_status(tmp_path, state="running", pid=123, step=19, total_steps=30, device="cpu", updated=1.5)
    size = (tmp_path / rp.STATUS).stat().st_size
    monkeypatch.setattr(atomic, "_new_temp", _no_space)          # no new file: the atomic write's temp file
    rf.write_status(tmp_path, state="failed", step=20, last_error="disk full")
    assert rf.read_status(tmp_path) == {"state": "failed", "pid": 123, "step": 20, "total_steps": 30,
                                        "device": "cpu", "updated": 1.5, "last_error": "disk full"}
    assert (tmp_path / rp.STATUS).stat().st_size >= size          # never truncated (that frees blocks)
    rf.write_status(tmp_path, last_error=None)                    # shorter: padded, still valid JSON
    assert rf.read_status(tmp_path)["last_error"] is None
    assert (tmp_path / rp.STATUS).stat().st_size >= size
    assert [p.name for p in tmp_path.iterdir()] == [rp.STATUS]


def test_status_write_falls_back_only_for_a_full_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_new_temp", _no_space)
    with pytest.raises(OSError):                                  # nothing to rewrite in place
        rf.write_status(tmp_path, state="failed")

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    (tmp_path / rp.STATUS).write_text('{"state": "running"}')
    monkeypatch.setattr(atomic, "_new_temp", denied)
    with pytest.raises(PermissionError):
        rf.write_status(tmp_path, state="failed")
    assert rf.read_status(tmp_path) == {"state": "running"}


# ---- a checkpoint left renamed aside by a save killed mid-swap ---------------------------------------
def _fake_checkpoint(path, complete=True):
    path.mkdir(parents=True)
    (path / "model.safetensors").write_text("")
    if complete:
        (path / "config.json").write_text("{}")


def test_checkpoint_dirs_lists_a_step_whose_only_whole_copy_is_aside(tmp_path):
    root = tmp_path / rp.CHECKPOINTS
    _fake_checkpoint(root / "step_000010")
    _fake_checkpoint(root / ".step_000020.old-4242-0badc0de")           # the swap's first rename, then a kill
    _fake_checkpoint(root / "step_000030")
    _fake_checkpoint(root / ".step_000030.old-4242-feedbeef")           # debris beside a whole target: once
    _fake_checkpoint(root / ".step_000040.old-4242-12345678", complete=False)   # not a whole copy
    _fake_checkpoint(root / ".step_000050.tmp-4242-12345678")           # an unfinished save
    assert rp.checkpoint_dirs(tmp_path) == [root / "step_000010", root / "step_000020", root / "step_000030"]


def test_a_vocabulary_the_corpus_cannot_have_is_refused_at_setup_in_one_line(tmp_path, monkeypatch, capsys):
    """--vocab-size 16 passes the argument check (its least) but not a corpus of more characters: the
    trainer ends at setup with one line and status 1, status.json saying why, not sentencepiece's traceback."""
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(tmp_path / "data"))
    corpus = tmp_path / "letters.tsv"
    corpus.write_text("".join(f"word{i} abcdefghijklmnopqrstuvwxyz\twort{i} zyxwvutsrqponmlkjihgfedcba\n"
                              for i in range(60)))
    run_dir = tmp_path / "run"
    assert train.main(["--run-dir", str(run_dir), "--dataset", str(corpus), "--preset", "tiny", "--vocab-size", "16",
                       "--tokenizer-type", "bpe", "--max-steps", "2", "--threads", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the bpe tokenizer: a vocabulary of 16 pieces") and \
        "use a vocabulary size of at least" in err[0]
    assert json.loads((run_dir / rp.STATUS).read_text())["state"] == "failed"
