"""AppTest: the rough edges a new user or a teacher hit first, each seen working on the page.

Sampling's headline is the top-ranked sample; the Beam page says in words why the search stopped;
the attention-over-training scrubber offers the shipped checkpoints of one run together; the
checkpoint table never shows "None" and says why a BLEU cell is blank; the bertviz tab numbers
from 1; an uploaded file is shown by the name it was uploaded under.
"""
from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from support.app_support import ROOT, TIMEOUT, no_exception, numbers, open_app, shown_translation, texts  # noqa: F401  (numbers: a fixture)
from explorer.config import DecodeConfig
from explorer.decoding import translate
from explorer.decoding.beam import STOP_REASONS
from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer.training import uploads
from support.training_fixtures import write_run

TEXT = "three hundred and twenty one"


@pytest.fixture
def shipped_only(monkeypatch):
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(ROOT / "checkpoints"))


def test_sampling_headline_is_the_top_ranked_sample(numbers):
    info, ckpt = numbers
    text, samples = "nine hundred and ninety nine thousand", 6
    for first in range(0, 200, samples):           # a seed range whose first sample does not rank first
        runs = [translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="sample", temperature=2.0,
                                                                        seed=first + i)).best for i in range(samples)]
        top = max(runs, key=lambda h: h.normalized)
        if top.normalized > runs[0].normalized and top.text != runs[0].text:
            break
    else:
        pytest.skip("every seed range tried sampled its best first")
    at = open_app(info.name, text=text, query={"dec": "sample", "temp": 2.0, "seed": first, "samples": samples})
    no_exception(at)
    shown = shown_translation(at)
    table = at.dataframe[0].value
    assert table["translation"].iloc[0] == shown == top.text != runs[0].text
    assert at.code[1].value == " ".join(top.pieces)                                # the pieces shown are its own


def test_the_beam_page_says_why_the_search_stopped(numbers):
    info, _ = numbers
    for query, code in (({}, "canonical"), ({"maxlen": 1}, "max_len")):
        at = open_app(info.name, "webapp/pages/beam.py", text=TEXT, query=query)
        no_exception(at)
        why = [m.value for m in at.markdown if m.value.startswith("**Why the search stopped:**")]
        assert len(why) == 1, texts(at.markdown)
        assert not any(c in why[0] for c in STOP_REASONS), why[0]                  # words, not the code
        assert ("length limit" in why[0]) == (code == "max_len"), why[0]
        assert "stopped: " not in texts(at.caption)


def test_the_scrubber_offers_the_shipped_checkpoints_of_one_run(numbers, shipped_only):
    info, _ = numbers
    at = open_app(info.name, "webapp/pages/checkpoints.py", text=TEXT)
    no_exception(at)
    run = at.selectbox(key="ck_run")
    assert run.value == "numbers-en-de"                              # the run of the checkpoint in use
    assert {"numbers-en-de (3 checkpoints)", "bible-es-en (2 checkpoints)"} <= set(run.options)
    steps = at.select_slider(key="ck_s_step")
    assert [str(o) for o in steps.options] == ["150", "300", "900"]
    at.select_slider(key="ck_s_step").set_value(0).run()
    no_exception(at)
    assert any(m.value.startswith("**Step 150:**") for m in at.markdown)
    at.selectbox(key="ck_run").set_value("bible-es-en").run()
    no_exception(at)
    assert [str(o) for o in at.select_slider(key="ck_s_step").options] == ["289", "3757"]


def test_the_checkpoint_table_shows_blanks_and_says_why(numbers, shipped_only):
    info, _ = numbers
    at = open_app(info.name, "webapp/pages/checkpoints.py", text=TEXT)
    no_exception(at)
    table = next(d.value for d in at.dataframe if "dev BLEU" in d.value.columns).set_index("checkpoint")
    assert "None" not in table.to_string() and "nan" not in table.to_string()
    assert table.loc["numbers-en-de", "dev BLEU"] == "—"                 # step 900; its best dev BLEU was at 450
    assert table.loc["numbers-en-de", "test BLEU"] == "99.86"
    assert table.loc["bible-es-en-epoch1", "dev BLEU"] == "2.21"         # recorded for that very step
    assert table.loc["bible-es-en-epoch1", "test BLEU"] == "—"           # never evaluated, as every page says it
    assert "dev BLEU** shows — where" in texts(at.caption)


def test_bertviz_tab_numbers_from_one(numbers):
    info, _ = numbers
    at = open_app(info.name, "webapp/pages/attention.py", text=TEXT, query={"view": "bertviz"})
    no_exception(at)
    assert "numbered from 1" in texts(at.caption) and "from 0" not in texts(at.caption)


def test_an_upload_is_shown_by_its_own_name(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path))
    path, _ = uploads.save_upload(b"one\teins\ntwo\tzwei\nthree\tdrei\n", "C:\\Users\\me\\my corpus\x07.tsv")
    assert path.parent == tmp_path / rp.UPLOADS and path.stem != "my corpus"      # kept by hash
    run = write_run(tmp_path / "mine", {"state": "finished"})
    write_json_atomic(run / rp.CONFIG, {**rf.read_json(run / rp.CONFIG), "dataset": str(path)})
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("webapp/pages/train.py").run()
    no_exception(at)
    jobs_table = [d.value for d in at.dataframe if "data" in d.value.columns]
    assert jobs_table and list(jobs_table[0]["data"]) == ["my corpus .tsv"], jobs_table
    assert path.name not in str(jobs_table[0].to_dict())
    assert os.path.basename(str(path)) != "my corpus .tsv"
