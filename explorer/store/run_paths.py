"""Where runs and checkpoints live and what their files are called: paths only, no file contents
(those are read and written by explorer.store.run_files and explorer.store.checkpoint).

    runs/<name>/train_config.json   the TrainConfig the run was started with
    runs/<name>/status.json         state, pid, step, total steps, last error
    runs/<name>/metrics.jsonl       one JSON object per line
    runs/<name>/train.log           the trainer's stdout/stderr when started as a job
    runs/<name>/trainer.lock        held (flock) while a trainer runs
    runs/<name>/tokenizer/          the tokenizer trained for the run (reused on resume)
    runs/<name>/checkpoints/step_000500/   checkpoints (checkpoint_dir; see explorer.store.checkpoint)
    runs/uploads/                   uploaded training data (not a run): <hash>.tsv, and <hash>.name
                                    holding the name it was uploaded under (shown instead of the hash)
    runs/heads/<sha>-<hash>.json    the head lab's results (not a run): one per weights + settings
    runs/align/<sha>-<hash>.json    the alignment scorecard's, named the same way
    runs/search/<sha>-<hash>.json   the beam-size curve's (the Search page), named the same way
    runs/graphs/<sha>-<hash>.json   the Graphs page's attribution graphs, named the same way (each of
                                    these four folders kept within ANALYSIS_KEEP_FILES / _BYTES)

runs/ is the repository's unless $EXPLORER_RUNS_DIR names another folder (tests, another disk);
shipped checkpoints are in the repository's checkpoints/. The names themselves are explorer.files.names'.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from explorer.files.settings import folder_problem
from explorer.files import names
from explorer.files.names import ALIGN, GRAPHS, HEADS, SEARCH, SHIPPED, UPLOAD_DEFAULT_NAME, UPLOAD_NAME_SUFFIX, UPLOADS
from explorer.files.names import RUN_CHECKPOINTS as CHECKPOINTS
from explorer.files.names import RUN_CONFIG as CONFIG
from explorer.files.names import RUN_LOCK as LOCK
from explorer.files.names import RUN_LOG as LOG
from explorer.files.names import RUN_METRICS as METRICS
from explorer.files.names import RUN_STATUS as STATUS
from explorer.files.names import RUN_TOKENIZER as TOKENIZER
from explorer.files.places import REPO_ROOT
from explorer.files.pruning import prune_oldest
from explorer.files.user_files import read_user_file


RUNS_ENV = "EXPLORER_RUNS_DIR"
_STEP = re.compile(r"step_(\d+)")
# What one training checkpoint takes per model parameter: float32 weights and Adam's two float32
# moments (trainer_state.pt); tied matrices are stored once, so this errs high.
CHECKPOINT_BYTES_PER_PARAMETER = 3 * 4
SPARE_BYTES = 100 << 20                  # the run's other files: logs, metrics, tokenizer, temporary copies



# ---- where runs and checkpoints live ----------------------------------------------------------
class RunsDirError(ValueError):
    """$EXPLORER_RUNS_DIR names something that is not a folder (a regular file, /dev/null): one line
    naming the variable (a ValueError, which the commands print as `error: ...`), not the
    NotADirectoryError of the first write under it."""


def runs_root() -> Path:
    """The runs directory: runs/ in the repository, or $EXPLORER_RUNS_DIR (tests, other disks);
    RunsDirError when that names something that is not a folder (explorer.files.settings.folder_problem)."""
    given = os.environ.get(RUNS_ENV)
    if given:
        problem = folder_problem(given)
        if problem:
            raise RunsDirError(f"${RUNS_ENV}={given}: {problem}; name a folder for runs and results")
    return Path(given or REPO_ROOT / "runs").resolve()


def analysis_file(folder: str, weights_sha: str, settings: dict) -> Path:
    """Where the app keeps an analysis's result (the head lab: HEADS, the alignment scorecard: ALIGN, the
    beam-size curve: SEARCH, an attribution graph: GRAPHS) for these weights and these settings (a dict of plain values): the cache key
    is in the name."""
    if folder not in (HEADS, ALIGN, SEARCH, GRAPHS):
        raise ValueError(f"unknown analysis folder {folder!r}")
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9]", "", str(weights_sha))[:32] or "unknown"
    return runs_root() / folder / f"{safe}-{digest}.json"


# Each analysis folder (HEADS, ALIGN, SEARCH, GRAPHS) is kept within this many result files and bytes, the
# oldest written first (a result deleted is computed again when asked for). The graphs' files, a pruned graph
# at six thresholds each, are the largest; the bytes bound is what holds those.
ANALYSIS_KEEP_FILES = 300
ANALYSIS_KEEP_BYTES = 256 * 1024 * 1024


def prune_analysis_folder(written: str | os.PathLike) -> list[Path]:
    """After the app wrote `written` (an analysis_file), the oldest other results in its folder deleted
    until the folder is within ANALYSIS_KEEP_FILES / ANALYSIS_KEEP_BYTES; nothing for a file elsewhere (a
    command's --out is the user's). Returns what was deleted."""
    path = Path(written).resolve()
    if path.parent not in {runs_root() / folder for folder in (HEADS, ALIGN, SEARCH, GRAPHS)}:
        return []
    return prune_oldest(path.parent.glob("*.json"), ANALYSIS_KEEP_FILES, ANALYSIS_KEEP_BYTES, spare=[path])


def head_lab_file(weights_sha: str, settings: dict) -> Path:
    """The head lab's result for these weights and settings (dataclasses.asdict(LabSettings))."""
    return analysis_file(HEADS, weights_sha, settings)


def shipped_root() -> Path:
    """The repository's checkpoints/: the checkpoints that ship with the app."""
    return REPO_ROOT / SHIPPED


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
    return base if base.strip(". ") else UPLOAD_DEFAULT_NAME


def upload_name_file(tsv: str | os.PathLike) -> Path:
    """Where the name an upload was made under is kept: beside it, <hash>.name."""
    return Path(str(tsv)).with_suffix(UPLOAD_NAME_SUFFIX)


def dataset_label(dataset: str) -> str:
    """How a run's dataset is shown: an uploaded file (runs/uploads/<hash>.tsv) by the name it was
    uploaded under, read back as untrusted text; anything else by its file name ("numbers" stays)."""
    path = Path(str(dataset))
    if path.parent.name == UPLOADS:
        try:                    # through the bounded reader: a FIFO or a huge file there reads as no name
            kept = read_user_file(upload_name_file(path), 16 * UPLOAD_NAME_CHARS).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            kept = ""
        if kept.strip():
            return clean_upload_name(kept)
    return path.name


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
        if step_of(name) is not None and p.is_dir() and (p / names.CONFIG).is_file() \
                and (p / names.WEIGHTS).is_file():
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
