"""The trainer's settings: a TrainConfig from a JSON file and/or flags, checked before anything starts.

Every TrainConfig field is a flag (`max_steps` -> `--max-steps`); `--config FILE.json` gives a base
that flags override; `--resume` without `--config` starts from the run's saved train_config.json.
A run directory that already holds a run takes `--resume` or `--overwrite` (start over), never a
fresh run on top of the old one's files.
Bad settings raise ValueError with a message meant for people (the CLI exits 2 with it, the app
shows it under the form).
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import fields
from pathlib import Path

from explorer.config import PRESETS, ModelConfig, TrainConfig, preset
from explorer.config.checks import check_train_fields
from explorer.files import limits, names
from explorer.files.places import model_folder_of
from explorer.files.user_files import UserFileError, read_user_json
from explorer.runtime.device import check_device
from explorer.store import run_paths as rp
from explorer.store.checkpoint import read_config
from explorer.store.run_clearing import clearing_plan, is_marked, never_started, trainer_entry
from explorer.store.run_files import RunLock
from explorer.text.tokenizer import MODEL_TYPES

# Upper limits: far above any setting that makes sense here (and above the app form's caps), low
# enough that a slip (a few extra zeros, "inf") is refused with a message instead of overflowing or
# exhausting memory later. Whether a batch fits this machine's memory is checked by the trainer.
MAX_STEPS = 10_000_000
MAX_EPOCHS = 1_000_000
MAX_BATCH_TOKENS = 1_000_000      # padded tokens per side per batch
MAX_ACCUM_STEPS = 1_024
MAX_SEQ_LEN = 4_096               # max_len: the longest sentence kept, in tokens
MAX_VOCAB_SIZE = 256_000
MAX_KEEP_LAST = 1_000
MAX_THREADS = 256                 # torch.set_num_threads(10**6) crashes the interpreter
SEED_RANGE = (-2 ** 63, 2 ** 64 - 1)   # what torch.manual_seed accepts
# Lower limits: validate() refuses less, and the app's form starts its fields there.
MIN_BATCH_TOKENS = 16
MIN_VOCAB_SIZE = 16
MIN_SEQ_LEN = 8

_FLAG_TYPES = {"max_steps": int, "epochs": float, "dropout": float, "threads": int, "init_from": str}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m explorer train",
                                     description="Train the encoder-decoder Transformer.")
    parser.add_argument("--config", help="JSON file with TrainConfig fields (flags override it)")
    parser.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="start over in a run directory that holds a run: its checkpoints, metrics, status, "
                             "config and tokenizer are removed first (train.log is kept)")
    defaults = TrainConfig()
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        value = getattr(defaults, f.name)
        if isinstance(value, bool):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind = _FLAG_TYPES.get(f.name, type(value) if value is not None else str)
            parser.add_argument(flag, dest=f.name, type=kind, default=None)
    return parser


def _read_config_file(path: str) -> dict:
    """A --config file, read as any path a user names (explorer.files.user_files: a regular file of at
    most limits.JSON_BYTES; /dev/zero or a FIFO is refused, never read or waited on)."""
    try:
        data = read_user_json(path, limits.JSON_BYTES)
    except UserFileError as err:
        raise ValueError(f"cannot read config file: {err}") from None
    except (ValueError, RecursionError) as err:
        raise ValueError(f"config file {path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a JSON object of TrainConfig fields")
    return data


def parse_config(argv: list[str] | None = None) -> tuple[TrainConfig, bool]:
    """(config, resume) from the command line: parse_command without the --overwrite flag."""
    cfg, resume, _ = parse_command(argv)
    return cfg, resume


def parse_command(argv: list[str] | None = None) -> tuple[TrainConfig, bool, bool]:
    """(config, resume, overwrite) from the command line; ValueError for anything that cannot work."""
    args = build_parser().parse_args(argv)
    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite contradict each other: continue the run or start over")
    data = _read_config_file(args.config) if args.config else {}
    saved = Path(args.run_dir or TrainConfig.run_dir) / rp.CONFIG
    if args.resume and not args.config and saved.is_file():
        data = _read_config_file(str(saved))
    for f in fields(TrainConfig):
        if getattr(args, f.name) is not None:
            data[f.name] = getattr(args, f.name)
    cfg = TrainConfig.from_dict(data)
    validate(cfg)
    check_device(cfg.device)     # one this machine has: one line now, not a traceback from inside the trainer
    check_run_folder(Path(cfg.run_dir), args.resume, args.config)
    if args.overwrite and Path(cfg.run_dir).exists() and not never_started(Path(cfg.run_dir)):
        clearing_plan(Path(cfg.run_dir))        # RunRefused now, before anything is touched, not after setup
    if not (args.resume or args.overwrite) and rp.holds_run(cfg.run_dir):
        # a fresh run's files would mix with the old ones (keep_last would prune by name across both)
        if not is_marked(Path(cfg.run_dir)):    # not a run of ours: starting over there is no advice to give
            raise ValueError(f"{cfg.run_dir} holds a checkpoints/ folder or a status.json but not the mark this "
                             "project's trainer leaves in its runs, so it cannot be started over: use --resume "
                             "to continue a run made there, or choose a new --run-dir")
        raise ValueError(f"{cfg.run_dir} already holds a run; use --resume to continue it "
                         "or --overwrite to start over")
    return cfg, args.resume, args.overwrite


def check_run_folder(run_dir: Path, resume: bool, config: str | None = None) -> None:
    """ValueError when --run-dir is a file, or a folder of the user's own files (no mark of a run, and
    entries no trainer writes): a run there would mix its files with theirs. The run's own --config file
    may wait there. --resume keeps to its own check."""
    if os.path.lexists(run_dir) and not run_dir.is_dir():
        raise ValueError(f"--run-dir {run_dir}: not a folder; name a new folder for the run")
    folder = model_folder_of(run_dir.parent)
    if folder is not None:                    # the model would gain a run the catalog lists as its own
        raise ValueError(f"--run-dir {run_dir} is inside the model folder {folder}; name a folder outside it")
    if resume or not run_dir.is_dir() or is_marked(run_dir):
        return
    if never_started(run_dir) and not RunLock(run_dir).is_held_by_other():
        (run_dir / names.RUN_STATUS).unlink(missing_ok=True)     # a setup stopped before the mark: start over
    given = Path(config).resolve() if config else None
    others = sorted(e.name for e in run_dir.iterdir() if not trainer_entry(e) and e.resolve() != given)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise ValueError(f"--run-dir {run_dir} holds files that are not a training run's ({shown}); "
                         "name a new folder for the run")


def _check_finite(cfg: TrainConfig) -> None:
    """NaN passes no comparison and inf passes every upper one: name them before the range checks."""
    for f in fields(TrainConfig):
        value = getattr(cfg, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{f.name} must be a finite number, not {value}")


def _check_upper_limits(cfg: TrainConfig) -> None:
    for name, limit in (("max_steps", MAX_STEPS), ("warmup", MAX_STEPS), ("batch_tokens", MAX_BATCH_TOKENS),
                        ("accum_steps", MAX_ACCUM_STEPS), ("max_len", MAX_SEQ_LEN),
                        ("vocab_size", MAX_VOCAB_SIZE), ("keep_last", MAX_KEEP_LAST), ("threads", MAX_THREADS)):
        value = getattr(cfg, name)
        if value is not None and value > limit:
            raise ValueError(f"{name} must be <= {limit:,}, not {value:,}")


def validate(cfg: TrainConfig) -> None:
    """Refuse settings that cannot work, before anything starts (the app shows these messages)."""
    check_train_fields(cfg)          # types, and the numbers no run can use (explorer.config.checks)
    _check_finite(cfg)
    _check_upper_limits(cfg)
    checks = [                       # the trainer's own, narrower than what any run could use
        (cfg.max_steps >= 1 or cfg.epochs, "max_steps must be >= 1"),
        (cfg.epochs is None or cfg.epochs <= MAX_EPOCHS, f"epochs must be <= {MAX_EPOCHS:,}"),
        (cfg.batch_tokens >= MIN_BATCH_TOKENS, f"batch_tokens must be >= {MIN_BATCH_TOKENS}"),
        (cfg.max_len >= MIN_SEQ_LEN, f"max_len must be >= {MIN_SEQ_LEN}"),
        (cfg.vocab_size >= MIN_VOCAB_SIZE, f"vocab_size must be >= {MIN_VOCAB_SIZE}"),
        (cfg.threads is None or cfg.threads >= 1, "threads must be >= 1"),
        (SEED_RANGE[0] <= cfg.seed <= SEED_RANGE[1], "seed must be in [-2**63, 2**64 - 1]"),
        (cfg.init_from is not None or cfg.preset in PRESETS, f"unknown preset {cfg.preset!r}"),
        (cfg.tokenizer_type in MODEL_TYPES, f"tokenizer_type must be one of {', '.join(MODEL_TYPES)}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def planned_model_config(cfg: TrainConfig) -> ModelConfig:
    """The model a run of `cfg` will train, as far as it is known before its tokenizer exists: the
    checkpoint's config when fine-tuning, else the preset with cfg.vocab_size (the trainer then takes
    the tokenizer's real sizes). For estimates made before launch: disk space, the planned learning
    rate. CheckpointError for an unreadable checkpoint, ValueError for an unknown preset."""
    if cfg.init_from:
        return read_config(cfg.init_from)[1]
    return preset(cfg.preset, src_vocab_size=cfg.vocab_size, tgt_vocab_size=cfg.vocab_size)
