"""docs/SECURITY.md, held line by line: the promises no other test held (the server's settings, the
upload bound at the door and in the app, reserved run names, a pickle in a checkpoint, infinite
weights, training bounds on the app's and the resume's way in, the job and model limits, the
analyses' cache bounds), the figures the document quotes checked against the constants it names, and
every test it names checked to exist.

Each test here can fail: where a refusal is checked, the payload is shown to work without the check
(a pickle that runs code does run it once weights_only is off).
"""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import torch

from explorer.config import TrainConfig, preset
from explorer.files.settings import MAX_MODEL_BYTES
from explorer.data import DataError
from explorer.store.catalog import list_checkpoints
from explorer.store.checkpoint import CheckpointError, load_checkpoint, load_trainer_state, save_checkpoint
from explorer.training import jobs, launch, uploads
from support.model_helpers import FakeTokenizer, make_model

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "SECURITY.md"
CONFIG_TOML = ROOT / ".streamlit" / "config.toml"
MIB, GIB = 1 << 20, 1 << 30
META = {"name": "promise", "src_lang": "en", "tgt_lang": "de", "training": {"step": 1}}


def server_config() -> dict:
    with open(CONFIG_TOML, "rb") as f:
        return tomllib.load(f)


# ---- Where it listens -------------------------------------------------------------------------------
def test_the_server_listens_on_localhost_only_with_xsrf_on_no_file_watcher_and_no_statistics():
    from streamlit import config as st_config

    found = server_config()
    options = {f"{section}.{key}": value for section, values in found.items() for key, value in values.items()}
    unknown = sorted(set(options) - set(st_config._config_options_template))
    assert not unknown, f"options Streamlit does not know (a typo is silently ignored): {unknown}"
    assert options["server.address"] == "127.0.0.1" and options["browser.serverAddress"] == "127.0.0.1"
    assert options["server.enableXsrfProtection"] is True
    assert options["server.fileWatcherType"] == "none" and options["server.runOnSave"] is False
    assert options["browser.gatherUsageStats"] is False


def test_a_closed_tabs_session_is_kept_20_s_not_streamlits_120():
    from streamlit import config as st_config

    assert server_config()["server"]["disconnectedSessionTTL"] == 20
    assert st_config._config_options_template["server.disconnectedSessionTTL"].default_val == 120


# ---- What it refuses: uploads -----------------------------------------------------------------------
def test_uploads_over_50_mib_are_refused_at_the_door_and_by_the_app(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    assert uploads.UPLOAD_MAX_BYTES == 50 * MIB
    assert server_config()["server"]["maxUploadSize"] * MIB == uploads.UPLOAD_MAX_BYTES   # Streamlit's MB: 2**20
    line = b"one\teins\n"
    too_big = line * (uploads.UPLOAD_MAX_BYTES // len(line) + 1)
    with pytest.raises(DataError, match=f"over the {uploads.UPLOAD_MAX_BYTES:,}-byte limit"):
        uploads.save_upload(too_big, "big.tsv")                        # the app's own check, by default
    assert not any(tmp_path.iterdir())                                  # nothing kept
    path, _ = uploads.save_upload(line * 3, "small.tsv")
    assert path.parent == tmp_path / "uploads"


# ---- What it writes: run names ----------------------------------------------------------------------
def test_a_run_name_is_1_to_64_characters_and_never_a_folder_the_runs_directory_keeps(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    assert jobs.run_dir_for("a") == tmp_path / "a"
    assert jobs.run_dir_for("a" * 64) == tmp_path / ("a" * 64)
    assert set(jobs.RESERVED_NAMES) == {"uploads", "heads", "align", "search", "graphs", "grounding", "features",
                                        "poison-demo"}
    for name in jobs.RESERVED_NAMES:
        with pytest.raises(jobs.JobError, match="is a folder the app uses for"):
            jobs.run_dir_for(name)
    for name in ("a" * 65, "-a", "_a"):
        with pytest.raises(jobs.JobError, match="letters, digits"):
            jobs.run_dir_for(name)
    assert not any(tmp_path.iterdir())                                  # naming creates nothing


# ---- What it writes: checkpoints load without pickle ------------------------------------------------
class RunsCode:
    """Unpickling this touches a file: what a hostile trainer_state.pt would do with os.system."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_trainer_state_holding_a_pickle_that_runs_code_is_refused_unrun(tmp_path, fake_tokenizer):
    path = save_checkpoint(tmp_path / "ck", make_model(), FakeTokenizer(), meta=META, trainer_state={"step": 1})
    assert load_trainer_state(path)["step"] == 1
    marker = tmp_path / "ran"
    torch.save({"step": 2, "payload": RunsCode(marker)}, path / "trainer_state.pt")
    with pytest.raises(CheckpointError, match="trainer_state.pt"):
        load_trainer_state(path)
    assert not marker.exists()
    assert load_checkpoint(path).name == "promise"                     # the weights never were a pickle
    torch.load(path / "trainer_state.pt", weights_only=False)          # the payload works where pickle is allowed
    assert marker.exists()


# ---- What it refuses: damaged checkpoints -----------------------------------------------------------
def test_infinite_weights_mark_a_checkpoint_damaged(tmp_path, fake_tokenizer):
    model = make_model()
    with torch.no_grad():
        model.encoder.layers[0].ffn.w_2.weight[1, 2] = float("-inf")
    save_checkpoint(tmp_path / "inf", model, FakeTokenizer(), meta=META)
    [info] = list_checkpoints(tmp_path)
    assert info.error and "infinite" in info.error and "w_2" in info.error, info.error
    with pytest.raises(CheckpointError, match="infinite"):
        load_checkpoint(tmp_path / "inf")


def opus_mt_base():
    """OPUS-MT en-de's shape as the importer reads it: Marian base, a 58,101-piece shared vocabulary."""
    return preset("base", src_vocab_size=58101, tgt_vocab_size=58101, max_len=512, final_logits_bias=True,
                  activation="swish", pe_layout="halves", pad_id=58100, eos_id=0, unk_id=1, decoder_start_id=58100)


def test_opus_mt_base_takes_about_half_a_gib_to_load_or_import_well_within_the_bound():
    from explorer.model import model_skeleton
    from explorer.store.weights import alias_groups, load_bytes

    cfg = opus_mt_base()
    skeleton = model_skeleton(cfg)
    state = skeleton.state_dict()
    header = {names[0]: {"dtype": "F32", "shape": list(state[names[0]].shape)} for names in alias_groups(skeleton)}
    load, imported = load_bytes(cfg, header), load_bytes(cfg, copies=2)        # as loading / importing count it
    assert 0.4 * GIB < load < 0.6 * GIB and 0.4 * GIB < imported < 0.6 * GIB, (load / GIB, imported / GIB)
    assert MAX_MODEL_BYTES == 2 * GIB and max(load, imported) < MAX_MODEL_BYTES / 3


# ---- What it refuses: training settings, from the app and on resume ---------------------------------
def test_training_settings_beyond_the_bounds_are_refused_by_the_app_and_on_resume(tmp_path, monkeypatch, capsys):
    from explorer import train
    from explorer.store import run_paths as rp
    from explorer.training.args import MAX_BATCH_TOKENS
    from support.training_fixtures import write_run

    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("EXPLORER_MAX_JOBS", "1")
    base = dict(dataset="numbers", preset="tiny", tokenizer_type="word", max_steps=20, threads=1)
    for bad, reason in ((dict(batch_tokens=MAX_BATCH_TOKENS + 1), "batch_tokens must be <= 1,000,000"),
                        (dict(max_steps=1, epochs=float("inf")), "epochs must be a finite number")):
        with pytest.raises(jobs.JobError, match=reason):              # what the Train page's Start calls
            launch.start(TrainConfig(run_dir=str(tmp_path / "new"), **{**base, **bad}))
    assert not any(tmp_path.iterdir())

    run = write_run(tmp_path / "old", {"state": "stopped", "step": 10, "total_steps": 20})
    step = run / rp.CHECKPOINTS / "step_000010"
    step.mkdir(parents=True)
    (step / "config.json").write_text("{}")
    (step / "model.safetensors").write_bytes(b"")
    assert jobs.poll(run).resumable
    saved = json.loads((run / rp.CONFIG).read_text())
    (run / rp.CONFIG).write_text(json.dumps({**saved, "batch_tokens": 10 ** 12}))   # edited by hand since
    log = (run / rp.LOG).read_text()
    with pytest.raises(jobs.JobError, match="batch_tokens must be <= 1,000,000"):   # the Train page's Resume
        launch.resume(run)
    assert train.main(["--run-dir", str(run), "--resume"]) == 2                      # the command line's
    assert "batch_tokens must be <= 1,000,000, not 1,000,000,000,000" in capsys.readouterr().err
    assert (run / rp.LOG).read_text() == log and not (run / rp.LOCK).exists()       # nothing launched


def test_one_training_job_at_a_time_on_cpu_unless_explorer_max_jobs_says_otherwise(monkeypatch):
    monkeypatch.delenv("EXPLORER_MAX_JOBS", raising=False)
    monkeypatch.setattr(launch, "gpu_count", lambda: 0)
    assert launch.max_jobs() == 1
    monkeypatch.setattr(launch, "gpu_count", lambda: 2)
    assert launch.max_jobs() == 2                                       # one per GPU
    monkeypatch.setenv("EXPLORER_MAX_JOBS", "3")
    assert launch.max_jobs() == 3


# ---- Memory -----------------------------------------------------------------------------------------
def test_at_most_four_models_are_loaded_at_once(monkeypatch):
    from webapp import models

    loads = []

    class Loaded:
        def __init__(self, path):
            self.model = torch.nn.Identity()
            self.path = path

    def fake_load(path, device=None):
        loads.append(path)
        return Loaded(path)

    monkeypatch.setenv(models.DEVICE_ENV, "cpu")
    monkeypatch.setattr(models, "load_checkpoint", fake_load)
    models._load.clear()
    try:
        assert models.MAX_MODELS == 4
        paths = [f"/models/m{i}" for i in range(models.MAX_MODELS + 1)]
        for path in paths[:-1]:
            models._load(path, "fingerprint")
        for path in paths[:-1]:                                         # four fit: none loaded again
            assert models._load(path, "fingerprint").path == path
        assert loads == paths[:-1]
        models._load(paths[-1], "fingerprint")                          # a fifth: one of the four goes
        for path in paths[:-1]:
            models._load(path, "fingerprint")
        assert len(loads) > len(paths)
    finally:
        models._load.clear()


def test_the_analyses_caches_are_bounded_in_bytes_page_by_page():
    from webapp import analyses as a
    from webapp import feature_analyses as f

    expected = {a.lens_translations: a.LENS_CACHE_BYTES, a.logit_lens: a.LENS_CACHE_BYTES,
                a.swap_suggestions: a.PATCHING_CACHE_BYTES, a.minimal_pair: a.PATCHING_CACHE_BYTES,
                a.patching_grids: a.PATCHING_CACHE_BYTES, a.patched_translation: a.PATCHING_CACHE_BYTES,
                a.contributions: a.CONTRIBUTIONS_CACHE_BYTES, a.source_share_calibration: a.CONTRIBUTIONS_CACHE_BYTES,
                a.contrast: a.CONTRAST_CACHE_BYTES, a.reference_fall: a.CONTRAST_CACHE_BYTES,
                a.align_one: a.ALIGNMENT_CACHE_BYTES, a.why_faithfulness: a.FAITHFULNESS_CACHE_BYTES,
                a.contribution_faithfulness: a.FAITHFULNESS_CACHE_BYTES,
                a.contrast_faithfulness: a.FAITHFULNESS_CACHE_BYTES,
                f.sentence_features: f.FEATURES_CACHE_BYTES, f.feature_effects: f.FEATURES_CACHE_BYTES,
                f.steer: f.FEATURES_CACHE_BYTES, f.feature_over_training: f.FEATURES_CACHE_BYTES,
                f.graph_result: f.GRAPHS_CACHE_BYTES, f.graph_intervention: f.GRAPHS_CACHE_BYTES}
    assert {fn.__name__: fn.cache.maxsize for fn in expected} == {fn.__name__: b for fn, b in expected.items()}
    cached = {fn for module in (a, f) for fn in vars(module).values()
              if callable(fn) and hasattr(fn, "cache") and getattr(fn, "__module__", "") == module.__name__}
    assert cached == set(expected), sorted(fn.__name__ for fn in cached ^ set(expected))


# ---- The document itself ----------------------------------------------------------------------------
def figures():
    """(what the code says, what the document says it is, the document's words for it)."""
    from explorer.studies.align.attribution import ATTRIBUTION_BYTES
    from explorer.config.checks import MAX_POSITION_VALUES, MODEL_LIMITS
    from explorer.training.args import MAX_BATCH_TOKENS
    from webapp import analyses, background, models, sentence

    ttl = server_config()["server"]["disconnectedSessionTTL"]
    return [
        (uploads.UPLOADS_KEEP_FILES, 50, "pruned oldest first to 50 files"),
        (uploads.UPLOADS_KEEP_BYTES, 500 * MIB, "50 files / 500 MiB"),
        (uploads.UPLOAD_MAX_BYTES, 50 * MIB, "Uploads over 50 MiB"),
        (sentence.MAX_CHARS, 2000, "text over 2,000 characters"),
        (MODEL_LIMITS["d_model"], 16384, "d_model <= 16,384"),
        (MODEL_LIMITS["src_vocab_size"], 1 << 20, "vocabulary <= 2^20"),
        (MODEL_LIMITS["tgt_vocab_size"], 1 << 20, "vocabulary <= 2^20"),
        (MAX_POSITION_VALUES, 1 << 24, "max_len x d_model <= 2^24 (`MAX_POSITION_VALUES`)"),
        (MAX_MODEL_BYTES, 2 * GIB, "more than 2 GiB of memory\n(`MAX_MODEL_BYTES`"),
        (MAX_BATCH_TOKENS, 1_000_000, "batch_tokens <= 1,000,000"),
        (models.TRANSLATION_CACHE_BYTES, 16 * MIB, "translations 16 MiB (`TRANSLATION_CACHE_BYTES`"),
        (models.TRACE_CACHE_BYTES, 24 * MIB, "24 MiB (`TRACE_CACHE_BYTES`"),
        (models.SCORE_CACHE_BYTES, 8 * MIB, "8 MiB for each\nof the two scoring caches (`SCORE_CACHE_BYTES`)"),
        (models.COMPARISON_CACHE_BYTES, 4 * MIB, "4 MiB for each of three\n(`COMPARISON_CACHE_BYTES`)"),
        (analyses.ALIGNMENT_CACHE_BYTES, 8 * MIB, "8 MiB (`ALIGNMENT_CACHE_BYTES`)"),
        (analyses.LENS_CACHE_BYTES, 4 * MIB, "4 MiB each (`LENS_CACHE_BYTES`"),
        (analyses.PATCHING_CACHE_BYTES, 4 * MIB, "`PATCHING_CACHE_BYTES`"),
        (analyses.CONTRIBUTIONS_CACHE_BYTES, 8 * MIB, "8 MiB each (`CONTRIBUTIONS_CACHE_BYTES`)"),
        (analyses.CONTRAST_CACHE_BYTES, 2 * MIB, "2 MiB each (`CONTRAST_CACHE_BYTES`)"),
        (ttl, 20, "freed 20 s after it disconnects"),
        (models.MAX_MODELS, 4, "At most 4 models"),
        (ATTRIBUTION_BYTES, 192 * MIB, "at most 192 MiB (`ATTRIBUTION_BYTES`"),
        (background.MAX_RUNNING_PER_KIND, 1, "one of each kind"),
        (background.MAX_QUEUED, 8, "at most 8 more wait in line"),
        (background.MAX_PER_USER, 2, "at most 2\nrunning or waiting"),
    ]


def squash(text: str) -> str:
    return " ".join(text.split())


def test_the_figures_the_document_quotes_are_the_codes():
    text = squash(DOC.read_text(encoding="utf-8"))
    wrong = [(words, code) for code, said, words in figures() if code != said]
    assert not wrong, f"a constant changed: correct docs/SECURITY.md where it says {wrong}"
    missing = [words for _, _, words in figures() if squash(words) not in text]
    assert not missing, f"docs/SECURITY.md no longer says: {missing}"


NAMED = re.compile(r"(tests/[\w/]+\.py)?::(\w+)|(tests/[\w/]+\.py)")


def test_every_test_the_document_names_exists():
    """`tests/x.py::name` names a test of that file; `::name` alone one of a file named before it in
    the same paragraph (or list item); `tests/x.py` alone a file. Code in backticks names no test."""
    missing = []
    for paragraph in re.split(r"\n\s*\n|\n- ", re.sub(r"`[^`\n]*`", "", DOC.read_text(encoding="utf-8"))):
        files: list[Path] = []
        for m in NAMED.finditer(paragraph):
            path, name, bare = m.group(1), m.group(2), m.group(3)
            if bare or path:
                files.append(ROOT / (bare or path))
                if not files[-1].is_file():
                    missing.append(bare or path)
                    continue
            if name:
                where = [files[-1]] if path else files
                if not any(re.search(rf"^(async )?def {name}\(", f.read_text(encoding="utf-8"), re.M)
                           for f in where if f.is_file()):
                    missing.append(f"{m.group(0)} (in {', '.join(str(f.relative_to(ROOT)) for f in where) or 'no file'})")
    assert not missing, missing
    assert len(NAMED.findall(DOC.read_text(encoding="utf-8"))) > 40
