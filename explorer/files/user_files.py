"""Paths a user names on a command line (a gold file to read, a JSON file to write), checked as
untrusted before a command spends any time on them.

A path may name anything: /dev/zero (endless bytes, yet a size of 0 in stat), a FIFO (an open for
reading waits for a writer forever), a directory, a device the atomic write would replace by a
fresh 0600 file when run as root (it renames a temp file over the path). So an input must be a
regular file, opened so that it never blocks and read up to a byte limit, and an output must be a
regular file or a new name in an existing directory, both writable, before the computation starts
rather than after it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

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


def read_user_file(path: str | os.PathLike, limit_bytes: int) -> bytes:
    """The bytes of a regular file of at most `limit_bytes`; UserFileError otherwise.

    The path is stat'ed before it is opened, so a device is never opened (an open alone can rewind
    a tape or take a terminal), then opened non-blocking (a FIFO swapped in between cannot hang the
    open) and fstat'ed again: what is read is what was checked. At most limit_bytes + 1 bytes are
    read, so a file that grows while it is read, or one whose stat lies, is still refused."""
    name = os.fspath(path)
    try:
        before = os.stat(name)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    if not stat.S_ISREG(before.st_mode):
        raise UserFileError(f"{name}: {_kind(before.st_mode)}, not a regular file")
    if before.st_size > limit_bytes:
        raise UserFileError(f"{name}: {before.st_size:,} bytes, more than the {limit_bytes:,} allowed")
    try:
        fd = os.open(name, _READ_FLAGS)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise UserFileError(f"{name}: {_kind(opened.st_mode)}, not a regular file")
        chunks, total = [], 0
        while total <= limit_bytes:
            chunk = os.read(fd, min(_CHUNK, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise UserFileError(f"{name}: cannot be read ({_why(err)})") from None
    finally:
        os.close(fd)
    if total > limit_bytes:
        raise UserFileError(f"{name}: more than the {limit_bytes:,} bytes allowed")
    return b"".join(chunks)


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
    return target
