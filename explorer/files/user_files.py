"""Every file the project reads from a checkpoint, a run or a path a user names goes through here,
checked as untrusted before a byte of it is read; every output path a command is given is checked
before the command spends any time.

A path may name anything: /dev/zero (endless bytes, yet a size of 0 in stat), a FIFO (an open for
reading waits for a writer forever), a directory, a device the atomic write would replace by a
fresh 0600 file when run as root (it renames a temp file over the path), a sparse file of 10 GiB that
takes 8 KB on disk, a symlink out of the folder it was found in (`card.json -> /etc/shadow`). So an
input must be a regular file, opened so that it never blocks, read up to a byte limit fixed by the
caller for that kind of file, and, when it belongs to a folder (`inside`: a checkpoint, a run), lie in
that folder once every symlink is followed. An output must be a regular file or a new name in a
directory where a file can really be created (a probe file is made and removed: /proc and /sys pass
every permission test and refuse only the write).
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


class UserFileError(ValueError):
    """A path that cannot be used as asked, with the reason in words."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def absent_or_odd(path: str | os.PathLike) -> str | None:
    """Why `path` is no regular file to read, in words ("file missing", "a FIFO (named pipe), not a regular
    file", "a broken symbolic link"), or None when it is one: a loader that said "missing" of a FIFO sent
    its user looking for a file that is there."""
    name = os.fspath(path)
    if not os.path.lexists(name):
        return "file missing"
    try:
        mode = os.stat(name).st_mode
    except OSError as err:
        return f"a broken symbolic link ({_why(err)})" if os.path.islink(name) else f"cannot be read ({_why(err)})"
    return None if stat.S_ISREG(mode) else f"{_kind(mode)}, not a regular file"


def _check_inside(name: str, inside: str | os.PathLike | None) -> None:
    """Refuse a path that, symlinks followed, leads out of the folder `inside` it was found in."""
    if inside is None:
        return
    root = os.path.realpath(inside)
    real = os.path.realpath(name)
    if os.path.commonpath([root, real]) != root:
        raise UserFileError(f"{name}: a symbolic link leading out of {os.fspath(inside)}; not followed")


def open_regular(path: str | os.PathLike, *, inside: str | os.PathLike | None = None) -> int:
    """A read-only file descriptor of a regular file (the caller closes it); UserFileError otherwise.

    The path is stat'ed before it is opened, so a device is never opened (an open alone can rewind
    a tape or take a terminal), then opened non-blocking (a FIFO swapped in between cannot hang the
    open) and fstat'ed again: what is read is what was checked. `inside`: the folder the file belongs
    to; a symlink leading out of it is refused."""
    name = os.fspath(path)
    _check_inside(name, inside)
    try:
        before = os.stat(name)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    if not stat.S_ISREG(before.st_mode):
        raise UserFileError(f"{name}: {_kind(before.st_mode)}, not a regular file")
    try:
        fd = os.open(name, _READ_FLAGS)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise UserFileError(f"{name}: {_kind(opened.st_mode)}, not a regular file")
    return fd


def check_regular(path: str | os.PathLike, *, inside: str | os.PathLike | None = None) -> None:
    """open_regular's checks of a file another library opens by its path (safetensors' memory map):
    UserFileError unless it is a regular file, within `inside` once every symlink is followed."""
    os.close(open_regular(path, inside=inside))


def _read_up_to(fd: int, count: int) -> bytes:
    """At most `count` bytes from `fd`, in chunks (fewer at the end of the file)."""
    chunks, total = [], 0
    while total < count:
        chunk = os.read(fd, min(_CHUNK, count - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_user_file(path: str | os.PathLike, limit_bytes: int, *, inside: str | os.PathLike | None = None) -> bytes:
    """The bytes of a regular file of at most `limit_bytes`; UserFileError otherwise (open_regular's
    checks first). At most limit_bytes + 1 bytes are read, so a file that grows while it is read, or
    one whose stat lies, is still refused."""
    name = os.fspath(path)
    fd = open_regular(name, inside=inside)
    try:
        size = os.fstat(fd).st_size
        if size > limit_bytes:
            raise UserFileError(f"{name}: {size:,} bytes, more than the {limit_bytes:,} allowed")
        data = _read_up_to(fd, limit_bytes + 1)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise UserFileError(f"{name}: more than the {limit_bytes:,} bytes allowed")
    return data


def parse_json(data: bytes | str) -> Any:
    """json.loads, with one more refusal as a ValueError: text nested deeper than Python's recursion limit
    ('[' * 100000), on which json.loads raises RecursionError, which no `except ValueError` catches."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("not valid JSON (nested too deeply)") from None


def json_values_bound(data: bytes) -> int:
    """At least the number of values in the JSON text `data`: every value but the first follows a `,`, a
    `:`, a `[` or a `{` (those inside strings count too, so it may count more)."""
    return 1 + sum(data.count(c) for c in (b",", b":", b"[", b"{"))


def json_of(data: bytes, name: str | os.PathLike, max_values: int | None = None) -> Any:
    """The JSON value of `data`, the bytes of the file `name`; ValueError naming the file otherwise: not
    UTF-8, not JSON (with the line and column), nested too deeply, a number too long to read, more than
    `max_values` values (json_values_bound, counted before parsing: json.loads takes up to ~80 bytes of
    memory a value, so 63 MB of `[{},{},...]` took 4.4 GB)."""
    if max_values is not None and (values := json_values_bound(data)) > max_values:
        raise ValueError(f"{os.fspath(name)}: {values:,} JSON values or more, where at most {max_values:,} are read")
    try:
        return parse_json(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError(f"{os.fspath(name)}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{os.fspath(name)}: not valid JSON ({exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno})") from None
    except ValueError as exc:                      # nested too deeply; int() of more than 4,300 digits
        said = str(exc) if "nested" in str(exc) else "not valid JSON (a number too long to read)"
        raise ValueError(f"{os.fspath(name)}: {said}") from None


def read_user_json(path: str | os.PathLike, limit_bytes: int, *, inside: str | os.PathLike | None = None) -> Any:
    """A JSON file read as read_user_file reads it; UserFileError for the file, ValueError (json_of) for
    what it holds."""
    return json_of(read_user_file(path, limit_bytes, inside=inside), path)


def tail_of_file(path: str | os.PathLike, limit_bytes: int, *, inside: str | os.PathLike | None = None) -> bytes:
    """The last `limit_bytes` of a regular file (all of it when smaller): for files that only grow (a
    log, metrics.jsonl), whose newest part is what is shown. Checked as open_regular checks."""
    fd = open_regular(path, inside=inside)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - limit_bytes), os.SEEK_SET)
        return _read_up_to(fd, limit_bytes)
    except OSError as err:
        raise UserFileError(f"{os.fspath(path)}: cannot be read ({_why(err)})") from None
    finally:
        os.close(fd)


def check_output_file(path: str | os.PathLike) -> Path:
    """`path` as a Path when a file may be written there by a rename (explorer.files.atomic): an
    existing regular file (through a symlink too) that is writable, or a new name in an existing
    directory; the directory must be writable either way, since the temp file is made in it.
    UserFileError names what is wrong: a device, FIFO, socket or directory (or a symlink to one), a
    symlink to nothing, a missing parent, no write permission."""
    name = os.fspath(path)
    if not name:
        raise UserFileError("an empty path")
    target = Path(name)
    parent = target.parent
    try:
        st = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):         # a new name, or a file where a folder should be
        if os.path.lexists(name):
            raise UserFileError(f"{name}: a symlink to nothing; name a regular file") from None
        st = None
    except OSError as err:
        raise UserFileError(f"{name}: cannot be checked ({_why(err)})") from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise UserFileError(f"{name}: {_kind(st.st_mode)}, not a regular file; name a file to write")
        if not os.access(name, os.W_OK):
            raise UserFileError(f"{name}: not writable")
    if not parent.is_dir():
        missing = "does not exist" if not os.path.lexists(parent) else "is not a directory"
        raise UserFileError(f"{name}: its directory {parent} {missing}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserFileError(f"{name}: its directory {parent} is not writable")
    try:                                # /proc, /sys: every test above passes, only a write tells
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as err:
        raise UserFileError(f"{name}: no file can be created in {parent} ({_why(err)})") from None
    os.close(fd)
    os.unlink(probe)
    return target
