"""File-system moves that leave either the old or the new thing whole, never half of one.

Used by checkpoints (a directory swapped in by rename) and by run files (JSON replaced by
os.replace). Every step that must survive a power cut is fsynced, the directory entry included.
"""
from __future__ import annotations

import errno
import glob
import json
import os
import re
import secrets
import shutil
import stat
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from explorer.files import limits, names
from explorer.files.user_files import json_of, json_values_bound, read_user_file

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)     # no space left, or over the user's quota
_TEMP_FILE = re.compile(r"(\d+)-[a-z0-9_]{8}\.tmp")    # what follows ".<name>." in a temp file of `replacing`
DEBRIS = re.compile(r"(tmp|old)-\d+-[0-9a-f]{8}")   # what follows ".<target>." in a sibling write_directory made


@contextmanager
def replacing(path: str | os.PathLike, mode: str = "w", **open_args: Any) -> Iterator[IO]:
    """Open a hidden temporary file beside `path` and, when the block ends without an error, fsync it
    and rename it over `path`: a reader sees the old file or the new one, never half of one. On an
    error the temporary file is removed and `path` is left as it was. The one tmp-then-rename of the
    project: every file written whole goes through it.

        with replacing(path) as f:
            f.write(text)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(path)
    fd, tmp = _new_temp(path)
    try:
        _keep_mode(fd, path)
        with os.fdopen(fd, mode, **open_args) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_TEMP_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _new_temp(path: Path) -> tuple[int, str]:
    """A new hidden temp file beside `path` (`.<name>.<pid>-<8 characters>.tmp`, as temp_file_pid reads
    it), opened for writing. Made with mode 0666, which the kernel narrows by the umask as for any new
    file: mkstemp's 0600 would make a result private that the user's umask makes shared."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{os.getpid()}-{''.join(secrets.choice(_TEMP_CHARS) for _ in range(8))}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {path}")


def _keep_mode(fd: int, path: Path) -> None:
    """The file written over `path` keeps the old file's permissions (a read-only card stays read-only),
    the special bits aside; where the file system refuses chmod (vfat, some network mounts), it keeps
    the new file's, and the write goes on."""
    try:
        os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode) & 0o777)
    except OSError:
        pass


def temp_file_pid(name: str, target: str) -> int | None:
    """The writer's process id when `name` is a temp file `replacing` made for a file called `target`
    (`.<target>.<pid>-<8 characters>.tmp`), else None: the one test of such names."""
    found = _TEMP_FILE.fullmatch(name[len(target) + 2:]) if name.startswith(f".{target}.") else None
    return int(found.group(1)) if found else None


def sweep_temp_files(path: Path) -> None:
    """Remove the temp files that writers of `path` killed mid-write left beside it (SIGKILL, or a
    SIGTERM that ran no cleanup): only names `replacing` gives (`.<name>.<pid>-<8 characters>.tmp`)
    whose process is gone; never another live writer's, never this process's (a thread may be writing)."""
    try:
        siblings = list(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))
    except OSError:
        return
    for tmp in siblings:
        pid = temp_file_pid(tmp.name, path.name)
        if pid is None or tmp.is_symlink() or not tmp.is_file():
            continue
        if pid != os.getpid() and not alive(pid):
            tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` whole or not at all (replacing)."""
    with replacing(path, "wb") as f:
        f.write(data)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a reader sees the old or the new file, never half of one."""
    with replacing(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)


class ResultTooLarge(ValueError):
    """A result larger than read_json_object reads back: written, it would be read as missing and
    computed again each time it is asked for."""


def write_result_atomic(path: Path, data: Any) -> None:
    """write_json_atomic for a result read back by read_json_object: one over its bounds (limits.RESULT_BYTES,
    limits.RESULT_VALUES) is refused with ResultTooLarge, saying by how much, and nothing is written."""
    text = json.dumps(data, indent=1).encode("utf-8")
    values = json_values_bound(text)
    if len(text) > limits.RESULT_BYTES or values > limits.RESULT_VALUES:
        raise ResultTooLarge(
            f"the result holds {values:,} JSON values in {len(text) / 2**20:,.1f} MiB, more than a result may "
            f"hold to be read back ({limits.RESULT_VALUES:,} values, {limits.RESULT_BYTES >> 20} MiB); it was not "
            f"written. Ask for less (a shorter sentence, fewer sentences, a higher threshold)")
    write_bytes_atomic(path, text)


def read_json_object(path: Path, keys: tuple[str, ...] = ()) -> dict | None:
    """A JSON object written by write_json_atomic, or None when it is missing, unreadable, not an object,
    larger than limits.RESULT_BYTES, of more values than limits.RESULT_VALUES or without one of `keys` (a
    damaged result is computed again, never shown half).

    Why the values are counted: json.loads takes up to ~80 bytes of memory per value, so a file of 100 MB
    of `{},{},...` took 2.7 GB to read; the count bounds what a read may take before it starts. A
    MemoryError (a process under a memory cap) is a file that cannot be read, as the others."""
    try:
        data = json_of(read_user_file(path, limits.RESULT_BYTES), path, limits.RESULT_VALUES)
    except (OSError, ValueError, RecursionError, MemoryError):          # UserFileError is a ValueError
        return None
    return data if isinstance(data, dict) and all(k in data for k in keys) else None


def rewrite_json_in_place(path: Path, data: Any) -> None:
    """Overwrite an existing JSON file inside the blocks it already has: how to still update it when
    the disk is too full for write_json_atomic's new temp file.

    Not atomic: a reader may catch it half-written (readers of run files tolerate that). The file is
    never truncated, which would free its blocks and leave the write needing new ones: shorter text
    is padded with spaces (still valid JSON), compact separators keep longer text within the last
    block as long as the file stays small. On a copy-on-write filesystem every write needs new
    blocks, so this can fail too (OSError).
    """
    text = json.dumps(data, separators=(",", ":")).encode()
    with open(path, "r+b") as f:
        f.write(text.ljust(os.fstat(f.fileno()).st_size))
        f.flush()
        os.fsync(f.fileno())


def write_files(directory: str | os.PathLike, files: Mapping[str, bytes]) -> list[str]:
    """Write each named file into `directory` whole (a reader sees the old file or the new one);
    returns the names, sorted. Tokenizers save their files with it."""
    for name, data in files.items():
        write_bytes_atomic(Path(directory) / name, data)
    return sorted(files)


def _sibling(target: Path, kind: str) -> Path:
    """A hidden sibling of `target` named as only this module names them (DEBRIS matches it)."""
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _is_debris_of(path: Path, target: Path, kind: str) -> bool:
    """`path` carries the name _sibling gives `target`'s siblings of this kind, and is a directory."""
    return (path.name.startswith(f".{target.name}.") and bool(DEBRIS.fullmatch(path.name[len(target.name) + 2:]))
            and path.name[len(target.name) + 2:].startswith(kind) and path.is_dir() and not path.is_symlink())


def write_directory(target: Path, write: Callable[[Path], None],
                    before_swap: Callable[[], object] | None = None) -> Path:
    """Build a directory whole and swap it in for `target`: write(tmp) fills a hidden sibling, every
    file in it and the directory are fsynced, then (once before_swap(), a last check, has not raised)
    swap_in. On any failure the sibling is removed and `target` is as it was. Checkpoints and exports
    are written this way; swap_in removes what `target` held, so callers decide first whether it may
    go (explorer.store.output_dirs). The sibling holds names.PARTIAL until the swap: what lets a later
    recover() tell a killed write of ours from a folder that only looks like one."""
    tmp = _sibling(target, "tmp")
    tmp.mkdir()
    try:
        (tmp / names.PARTIAL).write_bytes(b"")
        write(tmp)
        (tmp / names.PARTIAL).unlink(missing_ok=True)      # a writer may have emptied the folder itself
        for f in tmp.rglob("*"):
            if f.is_file():
                fsync_file(f)
        fsync_dir(tmp)
        if before_swap is not None:
            before_swap()
        swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def swap_in(tmp: Path, target: Path) -> None:
    aside = None
    if target.exists():
        aside = _sibling(target, "old")
        os.rename(target, aside)
        fsync_dir(target.parent)
    try:
        os.rename(tmp, target)
    except BaseException:
        if aside is not None:
            os.rename(aside, target)        # put the old one back
        raise
    fsync_dir(target.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def recover(target: Path, marker: str = names.CONFIG) -> None:
    """Finish what a killed save of `target` left, touching only what this module provably made: an aside
    copy (named as swap_in names it and holding `marker`, the file every whole copy of this kind has) is
    renamed back if the target is gone and removed otherwise; a temp sibling (named as write_directory
    names it, holding names.PARTIAL or, built whole but not swapped in, `marker`; its writer's process
    gone) is removed. A folder of a user's
    that only looks like one (`.OUT.tmp-foo`, `.OUT.old-1` without the marker) is never touched."""
    old_copies = asides(target, marker)
    if not target.exists() and old_copies:
        os.rename(old_copies[-1], target)
        fsync_dir(target.parent)
        old_copies = old_copies[:-1]
    for old in old_copies:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in target.parent.glob(f".{glob.escape(target.name)}.tmp-*"):
        if not _is_debris_of(tmp, target, "tmp") or not any((tmp / m).is_file() for m in (names.PARTIAL, marker)):
            continue
        pid = int(tmp.name.rsplit(".tmp-", 1)[1].split("-")[0])
        if pid == os.getpid() or not alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def asides(target: Path, marker: str = names.CONFIG) -> list[Path]:
    """Whole old copies renamed aside by an interrupted swap (named as swap_in names them, holding
    `marker`), oldest first."""
    found = [p for p in target.parent.glob(f".{glob.escape(target.name)}.old-*")
             if _is_debris_of(p, target, "old") and (p / marker).is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    try:
        fsync_file(path)
    except OSError:                     # some filesystems refuse fsync on directories
        pass


