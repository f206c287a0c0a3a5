"""`python -m explorer graph` on the shipped numbers model, its dictionaries read from SAELens folders as
the features study writes them (random ones: a graph is exact with any transcoder): the JSON it writes
loads in circuit-tracer's own graph models (schema version 1) and says what it must; every refusal is
one line, never a traceback."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from explorer.runtime.progress import Cancelled
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.context import RunContext
from explorer.studies.features import files as dictionary_files
from explorer.studies.features.job import dictionary_folder, load_all
from explorer.studies.graphs import __main__ as graph_command
from explorer.studies.graphs.job import GRAPH, GraphSettings
from explorer.studies.graphs.replacement import ffn_sites
from support.graph_helpers import random_transcoders
from support.model_helpers import one_thread  # noqa: F401 (a fixture)
from support.numerics import float32_atol, model_atol

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")


def circuit_tracer_model():
    try:
        from circuit_tracer.frontend.graph_models import Model
    except ImportError:
        pytest.fail("circuit-tracer's graph models are not installed: `make setup` installs them (--no-deps)")
    return Model


@pytest.fixture(scope="module")
def numbers():
    return load_checkpoint(str(NUMBERS), "cpu")


@pytest.fixture(scope="module")
def root(numbers, tmp_path_factory):
    """Every site's dictionary (and baseline) in a runs folder of its own, as `features train` keeps them."""
    folder = tmp_path_factory.mktemp("features")
    sha = numbers.meta["weights_sha256"]
    for kind, seed in (("trained", 0), ("random", 1)):
        for site, tc in random_transcoders(numbers.model, width=256, k=16, seed=seed).items():
            dictionary_files.save(tc, dictionary_folder(sha, site, kind, folder), site=site, weights_sha256=sha,
                                  model_name=numbers.name)
    return folder


def reader(root):
    return lambda model, sha: {site: kinds["trained"] for site, kinds in load_all(model, sha, root).items()}


def run(argv, dictionaries, capsys):
    code = graph_command.main([str(NUMBERS), *argv], dictionaries=dictionaries)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_command_writes_a_graph_circuit_tracer_reads(numbers, root, tmp_path, capsys):
    out = tmp_path / "graph.json"
    code, said, err = run(["--text", "three hundred and twelve", "--position", "2", "--out", str(out)],
                          reader(root), capsys)
    assert code == 0, err
    assert f"written: {out}" in said
    data = json.loads(out.read_text())
    loaded = circuit_tracer_model().model_validate(data)
    assert loaded.metadata.schema_version == 1
    tokens = loaded.metadata.prompt_tokens
    src_len = len(numbers.tokenizer.encode("three hundred and twelve", side="src")) + 1      # + EOS
    assert tokens[src_len - 1] == "</s>" and tokens[src_len] == "<s>" and len(tokens) == src_len + 3   # prefix: <s> + 2
    ids = [n.node_id for n in loaded.nodes]
    assert len(ids) == len(set(ids))
    assert all(link["source"] in ids and link["target"] in ids for link in loaded.links)
    assert all(0 <= n.ctx_idx < len(tokens) for n in loaded.nodes)
    labels = data["layer_labels"]
    assert [labels[str(i)] for i in range(4)] == ["encoder 0", "encoder 1", "decoder 0", "decoder 1"]
    assert {n.layer for n in loaded.nodes} <= set(labels)
    logits = [n for n in loaded.nodes if n.feature_type == "logit"]
    assert len(logits) == 1 and logits[0].is_target_logit and logits[0].ctx_idx == len(tokens) - 1
    assert sum(n.feature_type == "embedding" for n in loaded.nodes) == len(tokens)
    assert 0 <= data["top_source_position"] < src_len
    assert data["top_source_position"] == max(range(src_len), key=data["position_influence"].__getitem__)
    assert 0 <= data["scores"]["replacement"] <= 1 and 0 <= data["scores"]["completeness"] <= 1
    model = numbers.model
    logit = data["explained"]["logit"]
    assert data["replacement_logit_error"] <= model_atol(model, [logit])
    e, c = data["explained"], data["counts"]
    size, n = e["edges_abs"] + abs(e["bias"]), c["features"] + c["errors"] + c["tokens"] + 1
    assert data["logit_error"] <= model_atol(model, [logit]) + float32_atol(size, n)      # the sum of n float32 edges


def test_a_foil_makes_the_logit_a_difference(numbers, root, tmp_path, capsys):
    out = tmp_path / "graph.json"
    code, _, err = run(["--text", "seven", "--target", "sieben", "--position", "0", "--foil", "acht",
                        "--out", str(out)], reader(root), capsys)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["explained"]["piece"] != data["explained"]["foil"] and data["explained"]["foil"] is not None
    assert data["settings"]["foil"] == "acht" and data["settings"]["target"] == "sieben"


@pytest.mark.parametrize("argv, said", [
    (["--text", "seven", "--position", "40"], "--position 40: the output has positions 0.."),
    (["--text", "seven", "--foil", "two words"], "foil must be one word"),
    (["--text", "seven", "--node-threshold", "1.5"], "node_threshold >= 0.0 and <= 1.0"),
    (["--text", "   "], "--text: give a source sentence"),
    (["--text", "\u200b"], "--text: the sentence produced no source pieces"),      # it explained EOS alone
    (["--position", "1"], "the following arguments are required: --text"),
    (["--text", "seven", "--target", "  "], "--target is empty"),                  # it explained the greedy output
])
def test_bad_arguments_are_refused_in_one_line(root, tmp_path, capsys, argv, said):
    code, _, err = run([*argv, "--out", str(tmp_path / "g.json")], reader(root), capsys)
    assert code == 2 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 or "usage:" in err
    assert not (tmp_path / "g.json").exists()


def test_a_missing_dictionary_is_refused_with_the_command_that_makes_it(root, tmp_path, capsys):
    empty = tmp_path / "none"
    code, _, err = run(["--text", "seven", "--out", str(tmp_path / "g.json")], reader(empty), capsys)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"python -m explorer features train {NUMBERS}" in err
    assert not (tmp_path / "g.json").exists()


def test_the_door_reads_the_features_commands_dictionaries_or_names_the_command_that_makes_them(root, tmp_path):
    """Through `python -m explorer graph`: the dictionaries under the runs folder (as `features train` keeps
    them) make a graph; a runs folder without them is refused in one line naming that command."""
    door = [sys.executable, "-m", "explorer", "graph", str(NUMBERS), "--text", "seven", "--position", "0"]
    shutil.copytree(root, tmp_path / "runs" / "features")
    env = dict(os.environ, EXPLORER_RUNS_DIR=str(tmp_path / "runs"))
    proc = subprocess.run([*door, "--out", str(tmp_path / "g.json")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "g.json").read_text())["nodes"]
    env["EXPLORER_RUNS_DIR"] = str(tmp_path / "empty")
    proc = subprocess.run([*door, "--out", str(tmp_path / "h.json")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "python -m explorer features train" in proc.stderr
    assert not (tmp_path / "h.json").exists()


def test_a_graph_reads_the_trained_dictionaries_without_their_baselines(numbers, root, tmp_path, monkeypatch):
    """A graph reads each site's trained transcoder alone: a runs folder without the random baselines (which
    only the quality figures read) was refused."""
    from explorer.store.run_paths import RUNS_ENV
    shutil.copytree(root, tmp_path / "runs" / "features")
    for baseline in (tmp_path / "runs" / "features").glob("*/*/random"):
        shutil.rmtree(baseline)
    monkeypatch.setenv(RUNS_ENV, str(tmp_path / "runs"))
    read = graph_command.trained_dictionaries(numbers.model, numbers.meta["weights_sha256"])
    assert set(read) == set(ffn_sites(numbers.model))


def test_every_site_of_the_model_is_read(numbers, root):
    assert set(reader(root)(numbers.model, numbers.meta["weights_sha256"])) == set(ffn_sites(numbers.model))


def test_a_cancelled_graph_leaves_no_file(numbers, root, tmp_path):
    stop = threading.Event()
    stop.set()
    tcs = reader(root)(numbers.model, numbers.meta["weights_sha256"])
    with pytest.raises(Cancelled):
        GRAPH.to_file(tmp_path / "g.json", numbers.model, numbers.tokenizer, "seven", tcs, GraphSettings(),
                      context=RunContext(meta=numbers.meta, cancel=stop))
    assert not (tmp_path / "g.json").exists()
