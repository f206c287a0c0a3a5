"""AppTest of the Train page with no run yet: its own-data upload (what it says about a file it accepted or
refused, and about an accepted upload no longer on the server when Start would train on it), and a link's run=."""
from __future__ import annotations

import os
from pathlib import Path

from explorer.training import jobs, launch, uploads
from support.app_support import no_exception, open_app, runs  # noqa: F401

PAGE = "webapp/pages/train.py"
GOOD = b"one\teins\ntwo\tzwei\nthree\tdrei\n"


def shown(elements) -> str:
    """The elements' text as the browser shows it (Markdown escapes read back)."""
    import re
    return "\n".join(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(e.value)) for e in elements)


def upload(at, name: str, data: bytes):
    at.radio(key="tr_data").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload(name, data, "text/tab-separated-values").run()
    no_exception(at)
    return at


def launches(monkeypatch) -> list:
    """launch.start replaced by a recorder of the settings each Start press would launch."""
    launched = []

    def fake_start(cfg, nproc=1):
        launched.append(cfg)
        return jobs.Job(name=Path(cfg.run_dir).name, run_dir=Path(cfg.run_dir), state="starting")

    monkeypatch.setattr(launch, "start", fake_start)
    return launched


def test_an_accepted_upload_pruned_before_start_is_said_to_be_gone(runs, monkeypatch):
    """uploads/ is pruned oldest first when others upload: the page said "accepted" until Start, which
    then said "no such file" with the server's path. Now the page says it is gone and Start waits."""
    launched = launches(monkeypatch)
    at = upload(open_app(None, PAGE), "mine.tsv", GOOD)
    assert "3 sentence pairs accepted" in shown(at.success)
    (saved,) = (runs / "uploads").glob("*.tsv")
    os.utime(saved, (1000, 1000))                          # saved long ago: no longer spared as recent
    monkeypatch.setattr(uploads, "UPLOADS_KEEP_FILES", 1)
    uploads.save_upload(b"four\tvier\nfive\tfuenf\nsix\tsechs\n", "theirs.tsv")    # someone else uploads
    assert not saved.exists()
    at.run()
    no_exception(at)
    assert "mine.tsv was removed from the server to make room for newer uploads; upload it again" in shown(at.error)
    assert not at.success and at.button(key="tr_start").disabled and launched == []


def test_an_upload_of_fewer_pairs_than_training_needs_is_refused_at_once(runs, monkeypatch):
    """1 or 2 pairs were "accepted" (as "1 sentence pairs") and only the trainer said it needs 3."""
    launched = launches(monkeypatch)
    at = upload(open_app(None, PAGE), "one.tsv", b"one\teins\n")
    assert "need at least 3 sentence pairs to make train/dev/test splits, got 1" in shown(at.error)
    assert not at.success and at.button(key="tr_start").disabled and launched == []
    assert not list((runs / "uploads").glob("*.tsv"))                  # nothing kept


def test_a_first_line_read_as_a_header_is_said_so_when_accepted(runs):
    """`oui<TAB>yes` looks like two language codes: it was dropped as a header without a word."""
    at = upload(open_app(None, PAGE), "fr.tsv", b"oui\tyes\nnon\tno\nmerci\tthanks\nbonjour\thello\n")
    assert "fr.tsv: 3 sentence pairs accepted (0.0 kB); line 1 was read as a header: oui / yes." in shown(at.success)
    at = upload(open_app(None, PAGE), "plain.tsv", b"merci\tthanks\nbonjour\thello\nsalut\thi\n")
    assert "3 sentence pairs accepted" in shown(at.success) and "header" not in shown(at.success)


def test_a_refused_upload_is_named_as_an_accepted_one_is_cleaned_and_short(runs):
    """A refusal showed the name as given: 5,000 characters, and a right-to-left override that displays the
    rest reversed; the accepted message already showed it cleaned (run_paths.clean_upload_name)."""
    from explorer.store.run_paths import UPLOAD_NAME_CHARS, clean_upload_name
    name = "\u202emine" + "x" * 5000 + ".tsv"
    at = upload(open_app(None, PAGE), name, b"one\teins\ntwo zwei\n")
    error = shown(at.error)
    assert f"File refused: {clean_upload_name(name)}, line 2: expected 2 tab-separated columns" in error
    assert "\u202e" not in error and "x" * UPLOAD_NAME_CHARS not in error


def test_a_run_in_the_url_with_no_run_to_show_leaves_it(runs):
    """As on the Schedule page (tests/app/test_app_schedule.py): run= names nothing the page shows."""
    at = open_app(None, PAGE, None, {"run": "../../etc"})
    no_exception(at)
    assert "No runs yet" in shown(at.info)
    assert "run" not in at.query_params
