"""The Train, Schedule and Checkpoints pages (AppTest through app.py) over run directories in every
state: finished, running (a live lock holder), failed, killed (stopped) and damaged.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.training import jobs, launch
from support.training_fixtures import SENTENCE, build_runs, hold_lock, write_run
from support.waiting import STALL_S
from webapp.text_safety import JOINER

TIMEOUT = STALL_S                   # per script run: a hang guard, never a timing goal
APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("app_runs")
    keys = ("EXPLORER_RUNS_DIR", "EXPLORER_CHECKPOINT_ROOTS", "EXPLORER_MAX_JOBS", "EXPLORER_DEVICE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(EXPLORER_RUNS_DIR=str(root), EXPLORER_CHECKPOINT_ROOTS=str(root), EXPLORER_MAX_JOBS="1",
                      EXPLORER_DEVICE="cpu")                  # only these runs: no shipped checkpoints
    built = build_runs(root)
    yield built
    built["holder"].kill()
    built["holder"].wait()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def open_page(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["ckpt"] = "finished@20"
    at.run()
    for key, value in query.items():                 # the page's own keys (the landing page drops them)
        at.query_params[key] = str(value)
    at.switch_page(f"webapp/pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> str:
    """The elements' text as shown: run names, errors and file names come Markdown-escaped
    (webapp.text_safety), which the browser reads back to the characters."""
    return "\n".join(shown(str(e.value)) for e in elements)


def shown(markdown: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(JOINER, "")


def charts(at) -> int:
    return len(at.get("plotly_chart"))


def test_train_page_shows_every_job_state(runs):
    at = open_page("train")
    table = at.dataframe[0].value
    assert set(table["run"]) == {"finished", "running", "failed", "killed", "damaged"}
    assert at.button(key="tr_start").label == "Start training"
    expectations = {
        "finished": lambda: "finished" in texts(at.subheader) and charts(at) >= 2,
        "running": lambda: (at.button(key="tr_stop").label == "Stop"
                            and "step 10 of 100" in at.get("progress")[0].proto.text),
        "failed": lambda: "non-finite loss (nan) at step 7" in texts(at.error),
        "killed": lambda: "Stopped at step 10" in texts(at.warning) and at.button(key="tr_resume").label == "Resume",
        "damaged": lambda: "damaged or incomplete" in texts(at.warning),
    }
    for name, check in expectations.items():
        at.selectbox(key="tr_pick").set_value(name).run()
        assert not at.exception, (name, [e.value for e in at.exception])
        assert check(), name
    at.selectbox(key="tr_pick").set_value("finished").run()
    assert "hyp at 20" in at.table[0].value.to_string()           # the latest eval's samples


def test_the_job_shown_is_in_the_url_and_kept_over_a_visit_elsewhere(runs):
    """A link's run opens that job (an unknown one: the first), the URL names the job shown, and the
    job picked is still shown after a visit to another page (webapp.url_keys.seed, as every page's controls)."""
    at = open_page("train", run="killed")
    assert at.selectbox(key="tr_pick").value == "killed" and at.query_params["run"] == "killed"
    at = open_page("train", run="no-such-run")
    first = at.selectbox(key="tr_pick").options[0]
    assert at.selectbox(key="tr_pick").value == first and at.query_params["run"] == first
    at.selectbox(key="tr_pick").set_value("failed").run()
    assert at.query_params["run"] == "failed"
    at.switch_page("webapp/pages/translate.py").run()
    assert "run" not in at.query_params                        # not the landing page's key: dropped
    at.switch_page("webapp/pages/train.py").run()
    assert not at.exception
    assert at.selectbox(key="tr_pick").value == "failed" and at.query_params["run"] == "failed"


def launches(monkeypatch) -> list:
    """launch.start replaced by a recorder: the (cfg, nproc) each Start press would launch."""
    launched = []

    def fake_start(cfg, nproc=1):
        launched.append((cfg, nproc))
        return jobs.Job(name=Path(cfg.run_dir).name, run_dir=Path(cfg.run_dir), state="starting")

    monkeypatch.setattr(launch, "start", fake_start)
    return launched


def test_start_training_launches_the_settings_of_the_form(runs, monkeypatch):
    launched = launches(monkeypatch)
    at = open_page("train")
    next(t for t in at.text_input if t.label.startswith("Run name")).set_value("from-the-form").run()
    at.number_input(key="tr_numbers_warmup").set_value(50).run()
    at.button(key="tr_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Started **from-the-form**" in texts(at.success)
    (cfg, nproc), = launched
    assert (cfg.dataset, cfg.preset, cfg.tokenizer_type, cfg.max_steps, cfg.batch_tokens, cfg.warmup,
            cfg.lr_factor, cfg.threads, nproc) == ("numbers", "tiny", "word", 300, 2000, 50, 0.5, 1, 1)
    assert Path(cfg.run_dir) == runs["root"] / "from-the-form"


def test_fine_tuning_proposes_the_recipe_and_warns_above_it(runs, monkeypatch):
    from explorer.training.schedule import fine_tune_schedule
    from webapp import state

    launched = launches(monkeypatch)
    at = open_page("train")
    at.radio(key="tr_numbers_from").set_value("checkpoint").run()
    assert not at.exception, [e.value for e in at.exception]
    info = [i for i in state.available_checkpoints() if not i.error][at.selectbox(key="tr_numbers_init").value]
    recipe = fine_tune_schedule(info.meta["training"], info.meta["model"]["d_model"])
    assert at.number_input(key="tr_numbers_warmup_ft0").value == recipe.warmup
    assert at.number_input(key="tr_numbers_lr_ft0").value == pytest.approx(recipe.lr_factor, abs=1e-4)
    assert "Fine-tuning recipe" in texts(at.caption) and not at.warning
    high = round(3 * recipe.lr_factor, 4)                                       # a peak 1.5x where training ended
    at.number_input(key="tr_numbers_lr_ft0").set_value(high).run()
    assert "may undo what the model learned" in texts(at.warning)
    next(t for t in at.text_input if t.label.startswith("Run name")).set_value("tuned").run()
    at.button(key="tr_start").click().run()
    assert launched and launched[-1][0].init_from == str(info.path) and launched[-1][0].lr_factor == high


def test_train_page_refuses_bad_settings_and_a_full_slot(runs):
    at = open_page("train")
    root = runs["root"]
    before = sorted(p.name for p in root.parent.iterdir()), sorted(p.name for p in root.iterdir())
    for bad in ("bad name!", "../../trav-ui", "../escaped", str(root.parent / "abs-ui"), ".", "a/b",
                "x/../trav-ui-y", " ./trav-ui-dot", "y/."):
        next(t for t in at.text_input if t.label.startswith("Run name")).set_value(bad).run()
        at.button(key="tr_start").click().run()
        assert "Not started" in texts(at.error) and "run name" in texts(at.error), bad
        assert "letters, digits" in texts(at.error)                  # the message names the rule
        assert repr(bad.strip()) in texts(at.error)                  # and the name as typed, not a path made of it
    assert (sorted(p.name for p in root.parent.iterdir()), sorted(p.name for p in root.iterdir())) == before
    next(t for t in at.text_input if t.label.startswith("Run name")).set_value("fresh").run()
    at.button(key="tr_start").click().run()
    assert "limit is 1" in texts(at.error)                    # the running job holds the one slot
    assert not (runs["root"] / "fresh").exists()


def test_a_run_named_after_one_of_the_apps_folders_is_refused_saying_so(runs, monkeypatch):
    """'graphs' was accepted as a run name: the run would have been written among the Graphs page's files."""
    launched = launches(monkeypatch)
    at = open_page("train")
    for name, holds in (("graphs", "attribution graphs"), ("uploads", "uploaded training data")):
        next(t for t in at.text_input if t.label.startswith("Run name")).set_value(name).run()
        at.button(key="tr_start").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert f"Not started: run name '{name}' is a folder the app uses for" in texts(at.error), name
        assert holds in texts(at.error) and "choose another name" in texts(at.error)
        assert "letters, digits" not in texts(at.error)              # not the charset rule: the name is valid
    assert launched == []


def test_stop_button_stops_a_running_job(runs):
    run = write_run(runs["root"] / "zz-stoppable", {"state": "running", "step": 1, "total_steps": 9})
    holder = hold_lock(run)
    try:
        at = open_page("train")
        at.selectbox(key="tr_pick").set_value("zz-stoppable").run()
        at.button(key="tr_stop").click().run()
        assert not at.exception
        assert holder.wait(timeout=STALL_S) is not None            # SIGTERM ends it at once; the bound is a hang guard
        assert jobs.poll(run).state == "stopped"
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(run)


def test_schedule_page_for_every_run(runs):
    at = open_page("schedule")
    assert charts(at) >= 3
    labels = at.selectbox(key="sc_run").options
    assert len(labels) == 5
    for i, label in enumerate(labels):
        at.selectbox(key="sc_run").set_value(i).run()
        assert not at.exception, label
        if label.startswith("damaged"):
            assert "train_config.json cannot be read" in texts(at.warning)
        elif label.startswith("finished"):
            assert "Largest difference between logged and planned LR" in texts(at.caption)
    at.slider(key="sc_eps").set_value(0.3).run()
    assert "Right token: 0.7300" in texts(at.caption)           # 1 - 0.3 + 0.3/10


def test_checkpoints_page_table_compare_and_scrubber(runs):
    at = open_page("checkpoints")
    table = at.dataframe[0].value
    assert {"finished@10", "finished@20", "killed@10"} <= set(table["checkpoint"])
    assert "damaged checkpoint" in texts(at.warning)
    at.text_input(key="ck_text").set_value(SENTENCE).run()
    names = [o for o in at.selectbox(key="ck_a").options]
    at.selectbox(key="ck_a").set_value(next(o for o in names if "finished@10" in str(o)))
    at.selectbox(key="ck_b").set_value(next(o for o in names if "finished@20" in str(o))).run()
    assert not at.exception
    assert charts(at) >= 4                                      # 2 log-prob, attention grid, parameter change
    at.radio(key="ck_kind").set_value("cross").run()
    at.button(key="ck_score").click().run()
    assert not at.exception
    scores = at.dataframe[-1].value
    assert list(scores["model"]) == ["A", "B"] and scores["BLEU"].notna().all()
    at.text_input(key="ck_scrub_text").set_value(SENTENCE).run()
    assert "**Step 20:**" in texts(at.markdown)
    at.select_slider(key="ck_s_step").set_value(0).run()
    assert not at.exception and "**Step 10:**" in texts(at.markdown)


def test_schedule_sliders_are_in_the_url_clamped(runs):
    """A link's schedule and label-smoothing settings reopen the page's curves; out of range they are the
    sliders' ends, written back; tokens count from 1."""
    at = open_page("schedule", d=256, warmup=999999, factor=2.5, steps=3000, overlay=0, eps=0.3, vocab=5,
                   target=9, run="finished")
    assert at.select_slider(key="sc_d").value == 256 and at.slider(key="sc_warmup").value == 20_000
    assert at.slider(key="sc_factor").value == 2.5 and at.checkbox(key="sc_overlay").value is False
    assert at.slider(key="sc_target_5").value == 5                            # clamped to V
    assert {k: at.query_params[k] for k in ("d", "warmup", "factor", "steps", "overlay", "eps", "vocab",
                                            "target", "run")} == {
        "d": "256", "warmup": "20000", "factor": "2.5", "steps": "3000", "overlay": "0", "eps": "0.3",
        "vocab": "5", "target": "5", "run": "finished"}
    assert "Right token: 0.7600" in texts(at.caption)                         # 1 - 0.3 + 0.3/5
    at.slider(key="sc_warmup").set_value(800).run()
    assert at.query_params["warmup"] == "800"


def test_checkpoints_page_keeps_its_tab_pair_and_scrubber_in_the_url(runs):
    """The tab, the A/B pair (by name) and the scrubber's kind, layer, head and step reopen from a link;
    a layer or head beyond the model's is its last, and the URL says so; decoder rows are labelled by the
    token they write, as on the Attention page."""
    at = open_page("checkpoints", tab="Compare two", a="finished@10", b="killed@10", kind="decoder", layer=99,
                   head=-5, at="14", stray="x", over="B", attn="decoder", show="A", n="75", testset="B")
    names = at.selectbox(key="ck_a").options
    assert "finished@10" in names[int(at.selectbox(key="ck_a").index)]
    assert "killed@10" in names[int(at.selectbox(key="ck_b").index)]
    layers = int(at.number_input(key="ck_s_layer_decoder").max)
    assert at.number_input(key="ck_s_layer_decoder").value == layers and at.number_input(key="ck_s_head").value == 1
    assert {k: at.query_params[k] for k in ("tab", "a", "b", "kind", "layer", "head", "at")} == {
        "tab": "Compare two", "a": "finished@10", "b": "killed@10", "kind": "decoder", "layer": str(layers),
        "head": "1", "at": "10"}
    assert "stray" not in at.query_params
    at.text_input(key="ck_scrub_text").set_value(SENTENCE).run()
    assert "**Step 10:**" in texts(at.markdown)
    assert at.query_params["text"] == SENTENCE and at.text_input(key="ck_text").value == SENTENCE   # one sentence
    # Compare two's controls, drawn once there is a sentence: a sample size between two offered is the
    # nearer (75: 70), as a step between two saved ones was (14: 10, written back above)
    assert (at.radio(key="ck_whose").value, at.radio(key="ck_kind").value, at.radio(key="ck_view").value,
            at.select_slider(key="ck_n").value, at.radio(key="ck_testset").value) == ("B", "decoder", "A", 70, "B")
    assert {k: at.query_params[k] for k in ("over", "attn", "show", "n", "testset")} == {
        "over": "B", "attn": "decoder", "show": "A", "n": "70", "testset": "B"}
    at.radio(key="ck_view").set_value("B − A").run()
    assert "show" not in at.query_params                                      # the default, left out
    fig = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("-ck_s_fig"))
    assert "writes" in fig.proto.spec and "query (step that writes)" in fig.proto.spec


def test_upload_is_refused_with_its_first_bad_line_or_accepted(runs, monkeypatch):
    launched = launches(monkeypatch)
    at = open_page("train")
    at.radio(key="tr_data").set_value("upload").run()
    at.file_uploader(key="tr_upload").upload("bad.tsv", b"one\teins\ntwo zwei\n", "text/tab-separated-values").run()
    assert not at.exception
    assert "File refused" in texts(at.error) and "line 2" in texts(at.error)
    assert at.button(key="tr_start").disabled
    good = b"one\teins\ntwo\tzwei\nthree\tdrei\nfour\tvier\n"
    at.file_uploader(key="tr_upload").set_value(("good.tsv", good, "text/tab-separated-values")).run()
    assert "4 sentence pairs accepted" in texts(at.success)
    at.button(key="tr_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    ((cfg, _),) = launched
    assert Path(cfg.dataset).parent == runs["root"] / "uploads" and Path(cfg.dataset).read_bytes() == good


def test_results_zero_by_construction_are_explained(runs):
    """A fine-tune with fewer steps than its warm-up is warned about on the form; a run whose dev BLEU is 0
    beside a high chrF (3-word references: no 4-grams) says why under its curves. The note's claim is
    checked against the scorer itself."""
    from explorer.evaluation.scores import corpus_scores
    from explorer.training.notes import zero_bleu_note
    from support.training_fixtures import eval_record, train_records

    three = corpus_scores(["drei und zwanzig"], ["drei und zwanzig"])              # a perfect 3-word output
    four = corpus_scores(["drei hundert und zwanzig"], ["drei hundert und zwanzig"])
    assert (three["bleu"], three["chrf"]) == (0.0, 100.0) and four["bleu"] == pytest.approx(100.0)
    assert zero_bleu_note(three["bleu"], three["chrf"], ["drei und zwanzig"]) and \
        zero_bleu_note(four["bleu"], four["chrf"]) is None

    at = open_page("train")
    assert not any("warm-up steps" in w.value for w in at.warning)
    at.number_input(key="tr_numbers_steps").set_value(50).run()                   # the form's warm-up is 200
    assert "50 training steps is fewer than the 200 warm-up steps" in texts(at.warning)

    short = dict(eval_record(10, 0.0), chrf=100.0, exact=1.0,
                 samples=[{"src": "three and twenty", "ref": "drei und zwanzig", "hyp": "drei und zwanzig"}])
    status = {"state": "finished", "pid": 1, "step": 10, "total_steps": 10, "started": 1, "updated": 2}
    run = write_run(Path(os.environ["EXPLORER_RUNS_DIR"]) / "short-pairs", status, train_records([5, 10]) + [short])
    try:
        at = open_page("train", run="short-pairs")
        assert at.selectbox(key="tr_pick").value == "short-pairs"
        assert "BLEU is 0 here by construction" in texts(at.caption)
    finally:
        shutil.rmtree(run)


@pytest.mark.parametrize("odd, bad", [({"started": 1e300}, "started"), ({"started": -1e300, "updated": 1e20}, "started"),
                                      ({"step": -1, "total_steps": 1}, "step"), ({"step": 1, "total_steps": -5}, "total_steps")])
def test_a_status_file_with_impossible_numbers_leaves_them_unknown_not_a_broken_page(runs, odd, bad):
    """A start time of 1e300 (time.localtime cannot convert it) or a negative step put an exception box on
    the Train page, for every run listed beside that one."""
    from explorer.training.jobs import poll
    from support.training_fixtures import train_records

    status = {"state": "finished", "pid": 1, "step": 10, "total_steps": 10, "started": 1, "updated": 2, **odd}
    run = write_run(Path(os.environ["EXPLORER_RUNS_DIR"]) / "odd-status", status, train_records([5, 10]))
    try:
        job = poll(run)
        assert getattr(job, bad) == (0 if bad == "step" else None), (bad, getattr(job, bad))   # left unknown
        assert 0.0 <= job.fraction <= 1.0
        at = open_page("train", run="odd-status")                  # asserts no exception box
        assert at.selectbox(key="tr_pick").value == "odd-status"
    finally:
        shutil.rmtree(run)


def test_an_unknown_run_in_the_url_falls_back_to_the_first(runs):
    at = open_page("schedule", run="../../etc")
    assert at.selectbox(key="sc_run").value == 0
    first = at.selectbox(key="sc_run").options[0].split(" (")[0]
    assert at.query_params["run"] == first and at.query_params["run"] != "../../etc"


def test_checkpoints_page_names_its_figures_after_the_checkpoints(runs):
    """One export convention (webapp/downloads.py): a comparison's figures are saved as "A_vs_B_..." (the two
    checkpoints' names), the scrubber's under the checkpoint it shows."""
    from support.exports import figure_exports

    at = open_page("checkpoints", a="finished@10", b="finished@20")
    at.text_input(key="ck_text").set_value(SENTENCE).run()
    at.text_input(key="ck_scrub_text").set_value(SENTENCE).run()
    assert not at.exception
    exports = figure_exports(at)
    compared = [k for k in exports if k.startswith("ck_") and k != "ck_s_fig"]
    assert len(compared) >= 3, sorted(exports)                                # log-probs, attention grid, weights
    for key in compared:
        assert exports[key]["filename"].startswith("finished-10_vs_finished-20_"), (key, exports[key])
    assert exports["ck_s_fig"]["filename"].startswith("finished-20_"), exports["ck_s_fig"]
