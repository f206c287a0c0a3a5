"""Run every command that takes a file argument with that argument naming /dev/zero or a FIFO, in a
process of its own whose data memory is capped, and report what each command said.

Why a process of its own: a command that reads /dev/zero whole takes memory until the machine runs out,
and one that opens a FIFO waits for a writer forever; neither may take the test run down with it. The
cap (RLIMIT_DATA) turns the first into a MemoryError; a guard thread ends the second by opening the
FIFO's other end after GUARD_SECONDS, and a cap on file sizes (RLIMIT_FSIZE) keeps one that copies
/dev/zero from filling the disk (a hang guard only: the verdict is what the command said, and
`unjammed` records that the guard had to act).

    python -m support.hostile_commands CASES.json OUT.json
CASES.json: [[command, [arg, ...]], ...]; OUT.json: [{"code", "err", "unjammed"}, ...] in that order.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import threading
import time
import traceback

DATA_CAP_BYTES = 3 << 30      # the commands need well under 1 GiB: reading /dev/zero whole meets the cap
FILE_CAP_BYTES = 256 << 20    # no file a refusing command writes comes near: copying /dev/zero meets it
GUARD_SECONDS = 300           # far past any refusal (milliseconds): only a command that waits meets it


def _unjam(fifos: list[str], fired: list[bool], stop: threading.Event) -> None:
    """After GUARD_SECONDS, open each FIFO for writing and close it at once: a reader blocked in open()
    then sees the end of the file instead of waiting forever."""
    if stop.wait(GUARD_SECONDS):
        return
    while not stop.is_set():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                fired[0] = True
            except OSError:
                pass
        time.sleep(0.5)


def run(command: str, argv: list[str], fifos: list[str]) -> dict:
    from explorer.__main__ import main
    fired, stop = [False], threading.Event()
    guard = threading.Thread(target=_unjam, args=(fifos, fired, stop), daemon=True)
    guard.start()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([command, *argv])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
        err.write(f"{exit_.code}\n" if not isinstance(exit_.code, int) else "")
    except BaseException:                                   # noqa: BLE001 - reported, not raised
        code = "traceback"
        err.write(traceback.format_exc())
    finally:
        stop.set()
        guard.join()
    return {"code": code, "err": err.getvalue(), "unjammed": fired[0]}


def main() -> None:
    cases_file, out_file = sys.argv[1], sys.argv[2]
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_CAP_BYTES, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)           # a write past the cap fails (EFBIG) instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_CAP_BYTES, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    cases = json.loads(open(cases_file).read())
    fifos = sorted({a for _, argv in cases for a in argv if os.path.exists(a) and not os.path.isfile(a)
                    and not a.startswith("/dev/")})
    results = [run(command, argv, fifos) for command, argv in cases]
    with open(out_file, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
