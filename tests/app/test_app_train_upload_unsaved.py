"""AppTest of the Train page when the server cannot write an accepted upload (a full disk, a file-size limit):
one message that says so, no exception box, nothing half-written in the uploads folder, and Start waits."""
from __future__ import annotations

import errno

from explorer.files import atomic
from explorer.training import uploads
from support.app_support import no_exception, open_app, runs  # noqa: F401

PAGE = "webapp/pages/train.py"
GOOD = b"one\teins\ntwo\tzwei\nthree\tdrei\n"


def test_an_upload_the_disk_cannot_hold_is_said_so_without_a_traceback(runs, monkeypatch):
    def disk_full_midway(path, data):                   # the real write, failing as a full disk makes it fail
        with atomic.replacing(path, "wb") as f:
            f.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(uploads, "write_bytes_atomic", disk_full_midway)
    at = open_app(None, PAGE)
    at.radio(key="tr_data").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("mine.tsv", GOOD, "text/tab-separated-values").run()
    no_exception(at)
    [error] = [str(e.value).replace("\\", "") for e in at.error]
    assert error.startswith("mine.tsv could not be saved on the server: the server's disk is full. Nothing of it")
    assert not at.success and at.button(key="tr_start").disabled
    assert [p.name for p in (runs / "uploads").iterdir()] == []
