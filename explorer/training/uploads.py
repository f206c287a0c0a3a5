"""Parallel text uploaded on the Train page: validated, kept by content hash, pruned.

Uploads land in runs/uploads/<sha256 prefix>.tsv (the same file uploaded twice is kept once), with
the name it was uploaded under, cleaned (run_files.clean_upload_name), in <sha256 prefix>.name beside
it: the hash keeps the identity, the name is what the app shows (the latest upload's name; a name left
without its upload, which another session pruned while it was written, is pruned too). The
folder is bounded: the oldest files go first once it holds more than UPLOADS_KEEP_FILES files or
UPLOADS_KEEP_BYTES, but never a file a run trains on (resuming that run needs it), nor one of the
UPLOADS_RECENT_FILES newest saved in the last UPLOADS_RECENT_S seconds (someone is filling in the form
to train on it; a class uploading at once would otherwise prune each other's files before Start). The
Train page still checks its accepted upload is there on every run: an older one may be gone. Streamlit refuses
anything above UPLOAD_MAX_BYTES at the door (.streamlit/config.toml: server.maxUploadSize).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from explorer.data.files import MIN_PAIRS, validate_tsv
from explorer.files.atomic import write_bytes_atomic
from explorer.files.names import UPLOAD_NAME_SUFFIX, UPLOAD_SUFFIX
from explorer.files.pruning import prune_oldest
from explorer.store import run_paths as rp
from explorer.training import jobs

UPLOAD_MAX_BYTES = 50 * 1024 * 1024
UPLOADS_KEEP_BYTES = 500 * 1024 * 1024     # runs/uploads/ is pruned, oldest first, down to this ...
UPLOADS_KEEP_FILES = 50                    # ... and this many files (files a run trains on are kept)
UPLOADS_RECENT_S = 15 * 60                 # uploads saved this recently are spared too, ...
UPLOADS_RECENT_FILES = 5                   # ... the newest this many: the folder's bound grows by at most 5 uploads


class UploadNotSaved(Exception):
    """An accepted upload the server could not write (a full disk, a file-size limit); the message says so."""


def save_upload(data: bytes, name: str = "<upload>", max_bytes: int = UPLOAD_MAX_BYTES):
    """Validate an uploaded TSV (DataError with the first bad line, or fewer pairs than training needs) and
    keep it as runs/uploads/<hash>.tsv (UploadNotSaved when the server cannot write it). All three name the
    file by its cleaned name (rp.clean_upload_name).

    Returns (path, TsvReport)."""
    name = rp.clean_upload_name(name)          # refusals name it as the page does: no 5,000 characters, no U+202E
    report = validate_tsv(data, max_bytes=max_bytes, name=name, min_pairs=MIN_PAIRS)
    folder = rp.runs_root() / rp.UPLOADS
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}{UPLOAD_SUFFIX}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not (path.is_file() and _touched(path)):             # uploaded again: newest, pruned last
            write_bytes_atomic(path, data)                      # whole or not at all
    except OSError as err:
        raise UploadNotSaved(f"{name} could not be saved on the server: {jobs.unwritable(err)}. Nothing of it was "
                             "kept; ask whoever runs the server to make room, then upload it again.") from None
    with contextlib.suppress(OSError):                          # a missing name only shows the hash
        write_bytes_atomic(rp.upload_name_file(path), name.encode("utf-8"))
    _prune_uploads(folder, keep=path)
    return path, report


def _touched(path: Path) -> bool:
    """Mark an upload kept again as the newest (its mtime); False when it is gone meanwhile: another session's
    upload pruned it between the check and now, and it is written again."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def _prune_uploads(folder: Path, keep: Path) -> None:
    """Delete the oldest uploads until at most UPLOADS_KEEP_FILES files / UPLOADS_KEEP_BYTES remain.

    Never `keep` (just uploaded), the UPLOADS_RECENT_FILES newest of the last UPLOADS_RECENT_S seconds, and
    never a file a run trains on (jobs.trains_on: its train_config.json's dataset, or, for a run still starting,
    the one its launch named): resuming that run needs it.
    """
    in_use = [Path(d) for d in map(jobs.trains_on, jobs.list_jobs()) if d] + [keep] + _recent(folder)
    prune_oldest(folder.glob(f"*{UPLOAD_SUFFIX}"), UPLOADS_KEEP_FILES, UPLOADS_KEEP_BYTES, spare=in_use,
                 on_delete=lambda f: rp.upload_name_file(f).unlink(missing_ok=True))
    for name_file in folder.glob(f"*{UPLOAD_NAME_SUFFIX}"):
        if not name_file.with_suffix(UPLOAD_SUFFIX).exists():   # its upload pruned by another session while
            with contextlib.suppress(OSError):                  # this name was written: nothing shows it
                name_file.unlink()


def _recent(folder: Path) -> list[Path]:
    """The UPLOADS_RECENT_FILES newest uploads saved (or uploaded again) in the last UPLOADS_RECENT_S seconds."""
    since, found = time.time() - UPLOADS_RECENT_S, []
    for path in folder.glob(f"*{UPLOAD_SUFFIX}"):
        with contextlib.suppress(OSError):
            if (mtime := path.stat().st_mtime) >= since:
                found.append((mtime, path))
    return [path for _, path in sorted(found, reverse=True)[:UPLOADS_RECENT_FILES]]
