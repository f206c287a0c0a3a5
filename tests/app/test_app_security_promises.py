"""AppTest: docs/SECURITY.md's "What it shows", for the one source of text its other tests did not
cover: the name a training file was uploaded under (kept beside it in runs/uploads/<hash>.name and
shown on the Train page), made of an image, a link, HTML, a colour directive, LaTeX and a shortcode.
"""
from __future__ import annotations

import re

import pytest

from explorer.store import run_paths as rp
from support.app_support import NUMBERS, no_exception, open_app, runs  # noqa: F401
from webapp.text_safety import md_escape

NAME = "data![i](x.png) [l](http:x) <b>b<img src=x> :red[r] $x$ :smile:.tsv"    # no slash: a name, not a path
PUNCTUATION = r"!-/:-@\[-`{-~"
MARKDOWN = ("markdown", "caption", "info", "warning", "error", "success")


def test_an_uploaded_training_files_name_is_shown_as_text(runs):  # noqa: F811
    if not (NUMBERS / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoints/numbers-en-de")
    at = open_app(NUMBERS.name, "webapp/pages/train.py")
    no_exception(at)
    at.radio(key="tr_data").set_value("upload").run()
    at.file_uploader(key="tr_upload").set_value((NAME, b"one\teins\ntwo\tzwei\nthree\tdrei\n", "text/plain")).run()
    no_exception(at)
    [kept] = (runs / rp.UPLOADS).glob("*.tsv")
    assert rp.dataset_label(str(kept)) == NAME                           # the name is kept as uploaded
    success = " ".join(str(e.value) for e in at.success)
    assert md_escape(NAME) in success and "3 sentence pairs accepted" in success, success
    shown = [str(e.value) for kind in MARKDOWN for e in at.get(kind)]
    hostile = [s for s in shown if "png" in s]                         # escaped: x\.png
    assert hostile, shown
    for body in hostile:                                                 # nothing of it left active
        active = re.sub(rf"\\[{PUNCTUATION}]", "", body)
        for part in ("![", "](", "<", "$", ":red["):
            assert part not in active, (part, body)
