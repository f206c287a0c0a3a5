"""The Train page's uploads folder (explorer.training.uploads) is pruned oldest first, but the newest few
uploads of the last minutes are spared: someone who just uploaded is filling in the form to train on it."""
from __future__ import annotations

import os
import time

from explorer.training import uploads


def save(i: int):
    return uploads.save_upload(f"one\teins\ntwo\tzwei\nthree\tdrei {i}\n".encode(), f"u{i}.tsv")[0]


def test_the_newest_uploads_of_the_last_minutes_are_spared_within_a_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(uploads, "UPLOADS_KEEP_FILES", 1)
    monkeypatch.setattr(uploads, "UPLOADS_RECENT_FILES", 3)
    now = time.time()
    paths = []
    for i in range(5):
        paths.append(save(i))
        os.utime(paths[-1], (now - 60 + i, now - 60 + i))           # a minute ago, oldest first
    assert [p.exists() for p in paths] == [False, False, True, True, True]  # the 3 newest (the one just saved too)
    for p in paths[2:]:
        os.utime(p, (now - uploads.UPLOADS_RECENT_S - 60,) * 2)      # older than the window: no longer spared
    newest = save(5)
    assert sorted((tmp_path / "uploads").glob("*.tsv")) == [newest]
