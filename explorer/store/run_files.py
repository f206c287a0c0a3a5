"""Where runs and checkpoints live, and the files of a run directory: written by the trainer, read
by jobs, evaluation, plots and the app through the readers here.

    runs/<name>/train_config.json   the TrainConfig the run was started with
    runs/<name>/status.json         state, pid, step, total steps, last error (rewritten atomically)
    runs/<name>/metrics.jsonl       one JSON object per line: {"kind": "train"|"eval", "step": ...}
    runs/<name>/train.log           the trainer's stdout/stderr when started as a job
    runs/<name>/trainer.lock        held (flock) while a trainer runs: a second one is refused
    runs/<name>/tokenizer/          the tokenizer trained for the run (reused on resume)
    runs/<name>/checkpoints/step_000500/   checkpoints (checkpoint_dir; see explorer.store.checkpoint)
    runs/uploads/                   uploaded training data (not a run): <hash>.tsv, and <hash>.name
                                    holding the name it was uploaded under (shown instead of the hash)
    runs/heads/<sha>-<hash>.json    the app's head-lab results (not a run): one per checkpoint weights
                                    + LabSettings (head_lab_file), written whole by explorer.heads.job

runs/ is the repository's unless $EXPLORER_RUNS_DIR names another folder (tests, another disk);
shipped checkpoints are in the repository's checkpoints/. Only the trainer writes a run directory;
readers tolerate partial and damaged files (a torn last line of metrics.jsonl, a missing
status.json) and never raise on them.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from explorer.files.places import REPO_ROOT
from explorer.files.atomic import DISK_FULL, rewrite_json_in_place
from explorer.files.atomic import write_json_atomic  # noqa: F401  (re-exported: writers import it from here)
from explorer.store.metrics import Curves, curves_from_records

STATUS = "status.json"
METRICS = "metrics.jsonl"
CONFIG = "train_config.json"
LOG = "train.log"
LOCK = "trainer.lock"
TOKENIZER = "tokenizer"
CHECKPOINTS = "checkpoints"
UPLOADS = "uploads"                      # a folder of the runs directory that is not a run
HEADS = "heads"                          # neither: the head lab's results, <weights sha>-<settings hash>.json
ALIGN = "align"                          # neither: the alignment scorecard's results, named as HEADS' are
RUNS_ENV = "EXPLORER_RUNS_DIR"
_STEP = re.compile(r"step_(\d+)")
# What one training checkpoint takes per model parameter: float32 weights and Adam's two float32
# moments (trainer_state.pt); tied matrices are stored once, so this errs high.
CHECKPOINT_BYTES_PER_PARAMETER = 3 * 4
SPARE_BYTES = 100 << 20                  # the run's other files: logs, metrics, tokenizer, temporary copies


# ---- where runs and checkpoints live ----------------------------------------------------------
def runs_root() -> Path:
    """The runs directory: runs/ in the repository, or $EXPLORER_RUNS_DIR (tests, other disks)."""
    return Path(os.environ.get(RUNS_ENV) or REPO_ROOT / "runs").resolve()


def analysis_file(folder: str, weights_sha: str, settings: dict) -> Path:
    """Where the app keeps an analysis's result (the head lab: HEADS, the alignment scorecard: ALIGN)
    for these weights and these settings (a dict of plain values): the cache key is in the name."""
    if folder not in (HEADS, ALIGN):
        raise ValueError(f"unknown analysis folder {folder!r}")
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9]", "", str(weights_sha))[:32] or "unknown"
    return runs_root() / folder / f"{safe}-{digest}.json"


def head_lab_file(weights_sha: str, settings: dict) -> Path:
    """The head lab's result for these weights and settings (dataclasses.asdict(LabSettings))."""
    return analysis_file(HEADS, weights_sha, settings)


def shipped_root() -> Path:
    """The repository's checkpoints/: the checkpoints that ship with the app."""
    return REPO_ROOT / "checkpoints"


def checkpoint_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where a run keeps its checkpoint of `step`: checkpoints/step_000500 (zero-padded, so names sort by step)."""
    return Path(run_dir) / CHECKPOINTS / f"step_{int(step):06d}"


def step_of(checkpoint: str | os.PathLike) -> int | None:
    """The training step a run checkpoint's folder is named after (checkpoint_dir), else None."""
    match = _STEP.fullmatch(Path(str(checkpoint)).name)
    return int(match.group(1)) if match else None


def run_of(checkpoint: str | os.PathLike) -> Path | None:
    """The run directory a run checkpoint belongs to (runs/<name>/checkpoints/step_N -> runs/<name>), else None."""
    path = Path(str(checkpoint))
    return path.parent.parent if step_of(path) is not None and path.parent.name == CHECKPOINTS else None


def holds_run(run_dir: Path) -> bool:
    """A trainer has run here (it left status.json or checkpoints/): a new run must not mix with it."""
    return (Path(run_dir) / STATUS).exists() or (Path(run_dir) / CHECKPOINTS).exists()


def clear_run(run_dir: Path) -> None:
    """Remove a previous run's files before starting over: checkpoints, metrics, status, config, and
    the tokenizer trained for its settings. train.log stays (the app appends every launch to it).
    Only the trainer holding the run's lock calls this."""
    run_dir = Path(run_dir)
    for name in (CHECKPOINTS, TOKENIZER):
        if (run_dir / name).is_dir():
            shutil.rmtree(run_dir / name)
    for name in (STATUS, METRICS, CONFIG):
        (run_dir / name).unlink(missing_ok=True)


UPLOAD_NAME_SUFFIX = ".name"             # runs/uploads/<hash>.name: the uploaded file's own name
UPLOAD_NAME_CHARS = 80
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean_upload_name(name: str) -> str:
    """An uploaded file's name made safe to show: its last path part only (no folders, either
    slash), no control or bidirectional-override characters, spaces squeezed, at most
    UPLOAD_NAME_CHARS characters; "upload.tsv" when nothing is left."""
    base = re.split(r"[\\/]", str(name))[-1]
    base = " ".join(_UNSAFE_NAME.sub(" ", base).split())
    if len(base) > UPLOAD_NAME_CHARS:
        stem, dot, ext = base.rpartition(".")
        ext = dot + ext if stem and len(ext) <= 8 else ""
        base = base[:UPLOAD_NAME_CHARS - len(ext) - 1].rstrip() + "…" + ext
    return base if base.strip(". ") else "upload.tsv"


def upload_name_file(tsv: str | os.PathLike) -> Path:
    """Where the name an upload was made under is kept: beside it, <hash>.name."""
    return Path(str(tsv)).with_suffix(UPLOAD_NAME_SUFFIX)


def dataset_label(dataset: str) -> str:
    """How a run's dataset is shown: an uploaded file (runs/uploads/<hash>.tsv) by the name it was
    uploaded under, read back as untrusted text; anything else by its file name ("numbers" stays)."""
    path = Path(str(dataset))
    if path.parent.name == UPLOADS:
        try:
            with open(upload_name_file(path), "rb") as f:
                kept = f.read(4 * UPLOAD_NAME_CHARS).decode("utf-8", errors="replace")
        except OSError:
            kept = ""
        if kept.strip():
            return clean_upload_name(kept)
    return path.name


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def read_train_config(run_dir: Path) -> dict:
    """train_config.json as a dict; {} when it is missing or damaged."""
    config = read_json(Path(run_dir) / CONFIG, {})
    return config if isinstance(config, dict) else {}


def append_metrics(run_dir: Path, record: dict) -> None:
    with open(Path(run_dir) / METRICS, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def read_metrics(run_dir: Path) -> list[dict]:
    """All complete metric records; damaged lines (a kill mid-write) are skipped."""
    records = []
    try:
        lines = (Path(run_dir) / METRICS).read_text(errors="replace").splitlines()
    except OSError:
        return records
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def has_metrics(run_dir: Path) -> bool:
    """Whether the trainer has logged anything yet (metrics.jsonl exists)."""
    return (Path(run_dir) / METRICS).is_file()


def read_curves(run_dir: Path) -> Curves:
    """The run's metrics as arrays (explorer.store.metrics.Curves), what every figure and ETA reads."""
    return curves_from_records(read_metrics(run_dir))


def drop_metrics_after(run_dir: Path, step: int) -> None:
    """On resume, forget records of steps after the checkpoint: they are about to be trained again."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return
    keep = [r for r in read_metrics(run_dir) if not isinstance(r.get("step"), int) or r["step"] <= step]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in keep))
    os.replace(tmp, path)


def log_tail(run_dir: str | os.PathLike, lines: int = 30, max_bytes: int = 64 * 1024) -> str:
    """The end of train.log; tqdm's carriage-return updates collapse to their latest state."""
    path = Path(run_dir) / LOG
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - max_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    parts = [[p for p in ln.split("\r") if p.strip()] for ln in text.split("\n")]
    return "\n".join([p[-1].rstrip() for p in parts if p][-lines:])


def write_status(run_dir: Path, **fields: Any) -> dict:
    """Merge `fields` into status.json (the trainer is the only writer).

    On a full disk the atomic write cannot make its temp file; status.json is then rewritten in
    place, so a `failed` state and its reason still reach the readers. Other errors, and a disk too
    full even for that, raise OSError.
    """
    path = Path(run_dir) / STATUS
    status = read_json(path, {}) or {}
    status.update(fields)
    try:
        write_json_atomic(path, status)
    except OSError as err:
        if err.errno not in DISK_FULL or not path.is_file():
            raise
        rewrite_json_in_place(path, status)
    return status


def read_status(run_dir: Path) -> dict:
    status = read_json(Path(run_dir) / STATUS, None)
    return status if isinstance(status, dict) else {}


class RunLock:
    """An exclusive flock on runs/<name>/trainer.lock; the OS drops it when the process dies."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder_pid(self) -> int | None:
        """The pid the holder wrote into the lock file (None when unknown)."""
        pid = read_json(self.path)
        return pid if isinstance(pid, int) else None

    def is_held_by_other(self) -> bool:
        """True if some live process holds the lock (used by readers to tell running from dead)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Step checkpoints of a run, oldest first: the complete ones (config.json and weights present),
    and a step whose only whole copy a save killed mid-swap left renamed aside (`.step_000300.old-*`).
    That one is listed under its own name: load_checkpoint reads the aside copy, and the trainer's
    resume renames it back (explorer.files.atomic.recover)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    steps = set()
    for p in root.iterdir():
        name = p.name[1:].split(".old-")[0] if p.name.startswith(".") and ".old-" in p.name else p.name
        if step_of(name) is not None and p.is_dir() and (p / "config.json").is_file() \
                and (p / "model.safetensors").is_file():
            steps.add(root / name)
    return sorted(steps, key=lambda p: p.name)


# ---- disk space ---------------------------------------------------------------------------------
def disk_needed(n_params: int, checkpoints: int) -> int:
    """Bytes a run needs free to write `checkpoints` training checkpoints of a model with n_params
    parameters, plus SPARE_BYTES for its other files. The one estimate: jobs checks a whole run's
    before launching it, the trainer one checkpoint's before each save."""
    return checkpoints * CHECKPOINT_BYTES_PER_PARAMETER * n_params + SPARE_BYTES


def free_bytes(path: str | os.PathLike) -> int:
    """Free space on the disk that holds (or will hold) `path`."""
    path = Path(path)
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free
