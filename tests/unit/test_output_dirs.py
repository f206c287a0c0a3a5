"""`python -m explorer.convert` writes only where it may: a new directory, an empty one, or one that holds
exactly what the same command wrote there before; anything else is refused before anything is
computed, and nothing the user had is removed. With --overwrite an earlier output of the converter is
replaced even if its files changed, but never a directory that holds files the converter did not
write, the working directory or one of its ancestors, the project, or the command's own input.

Everything here lives in tmp_path; the shipped checkpoint is only read.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from explorer.interop.cli import main as convert
from explorer.store.output_dirs import MARKER, OutputRefused, check_output_dir, mark_output
from tests.support.marian_helpers import random_marian

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "numbers-en-de"


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def users_directory(path: Path) -> dict[str, bytes]:
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("three years of work")
    (path / "data").mkdir()
    (path / "data" / "results.csv").write_text("a,b\n1,2\n")
    return files_of(path)


@pytest.fixture(scope="module")
def hf_source(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("hf") / "opus-mt-xx"
    random_marian(source)
    (source / "README.md").write_text("# a model card the user keeps\n")
    (source / "generation_config.json").write_text("{}")
    return source


# ---- to-hf / to-ct2: OUT holds a user's files ----------------------------------------------------
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_to_hf_never_deletes_a_users_directory(tmp_path, capsys, overwrite):
    out = tmp_path / "mine"
    before = users_directory(out)
    assert convert(["to-hf", str(SHIPPED), str(out), *overwrite]) == 2
    assert files_of(out) == before
    err = capsys.readouterr().err
    assert "thesis.tex" in err and ("--overwrite" in err or "did not write" in err)


def test_to_ct2_never_deletes_a_users_directory(tmp_path, capsys):
    out = tmp_path / "mine"
    before = users_directory(out)
    assert convert(["to-ct2", str(SHIPPED), str(out)]) == 2
    assert files_of(out) == before


def test_the_working_directorys_ancestors_are_never_replaced(tmp_path, monkeypatch):
    work = tmp_path / "project" / "src"
    work.mkdir(parents=True)
    (work / "main.py").write_text("print('hi')")
    monkeypatch.chdir(work)
    for out in (tmp_path / "project", Path(".."), Path(".")):
        assert convert(["to-hf", str(SHIPPED), str(out), "--overwrite"]) == 2
    assert (work / "main.py").read_text() == "print('hi')"


def test_a_marked_ancestor_of_the_working_directory_is_still_refused(tmp_path, monkeypatch):
    out = tmp_path / "export"
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 0
    (out / "inside").mkdir()
    mark_output(out, "explorer.convert to-hf")               # everything in it listed as the command's
    monkeypatch.chdir(out / "inside")
    with pytest.raises(OutputRefused, match="working directory"):
        check_output_dir(out, "explorer.convert to-hf", overwrite=True)


def test_the_project_and_the_input_are_never_replaced(tmp_path):
    project = Path(__file__).resolve().parents[2]
    with pytest.raises(OutputRefused):
        check_output_dir(project, "explorer.convert to-hf", overwrite=True)
    with pytest.raises(OutputRefused, match="input"):
        check_output_dir(SHIPPED, "explorer.convert to-hf", overwrite=True, inputs=[SHIPPED])


def test_a_symlink_or_a_file_as_out_is_refused(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "file").write_text("x")
    assert convert(["to-hf", str(SHIPPED), str(tmp_path / "link"), "--overwrite"]) == 2
    assert convert(["to-hf", str(SHIPPED), str(tmp_path / "file")]) == 2
    assert (tmp_path / "link").is_symlink() and (tmp_path / "file").read_text() == "x"


# ---- what may be written -------------------------------------------------------------------------
def test_a_new_or_empty_directory_is_written_and_marked(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new" / "deeper", empty):
        assert convert(["to-hf", str(SHIPPED), str(out)]) == 0
        assert (out / "model.safetensors").is_file() and (out / MARKER).is_file()


def test_the_same_command_may_write_again_over_its_own_output(tmp_path):
    out = tmp_path / "export"
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 0
    assert convert(["to-hf", str(SHIPPED), str(out), "--dtype", "float16"]) == 0
    assert (out / MARKER).is_file()


def test_an_edited_output_needs_overwrite_and_an_added_file_refuses_even_then(tmp_path, capsys):
    out = tmp_path / "export"
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 0
    (out / "README.md").write_text("my own notes about this export")
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "README.md").read_text() == "my own notes about this export"
    assert convert(["to-hf", str(SHIPPED), str(out), "--overwrite"]) == 0
    (out / "notes.txt").write_text("added by the user")
    assert convert(["to-hf", str(SHIPPED), str(out), "--overwrite"]) == 2
    assert (out / "notes.txt").read_text() == "added by the user"


def test_an_output_of_another_command_is_not_this_ones(tmp_path):
    out = tmp_path / "export"
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 0
    with pytest.raises(OutputRefused, match="--overwrite"):
        check_output_dir(out, "explorer.convert from-hf")


# ---- from-hf: OUT holds a config.json ------------------------------------------------------------
def test_from_hf_into_its_own_source_is_refused(hf_source, capsys):
    before = files_of(hf_source)
    for flags in ([], ["--overwrite"]):
        assert convert(["from-hf", str(hf_source), str(hf_source), *flags]) == 2
    assert files_of(hf_source) == before


def test_from_hf_never_replaces_a_shipped_checkpoint(hf_source, tmp_path):
    shipped = tmp_path / "numbers-en-de"
    shutil.copytree(SHIPPED, shipped)
    before = files_of(shipped)
    for flags in ([], ["--overwrite"]):
        assert convert(["from-hf", str(hf_source), str(shipped), *flags]) == 2
    assert files_of(shipped) == before


def test_from_hf_never_replaces_another_project_with_a_config_json(hf_source, tmp_path):
    project = tmp_path / "webapp"
    project.mkdir()
    (project / "config.json").write_text('{"port": 80}')
    (project / "index.js").write_text("console.log(1)")
    before = files_of(project)
    assert convert(["from-hf", str(hf_source), str(project), "--overwrite"]) == 2
    assert files_of(project) == before


def test_from_hf_imports_again_over_its_own_import(hf_source, tmp_path):
    out = tmp_path / "models" / "opus-mt-xx"
    assert convert(["from-hf", str(hf_source), str(out)]) == 0
    assert convert(["from-hf", str(hf_source), str(out)]) == 0
    assert (out / "config.json").is_file() and (out / MARKER).is_file()


def test_the_check_comes_before_the_model_is_read(tmp_path, monkeypatch):
    """A refused OUT is said at once: nothing is loaded, converted or written."""
    import explorer.store.checkpoint as checkpoint

    def no_load(*_a, **_k):
        raise AssertionError("the checkpoint was loaded before OUT was checked")
    monkeypatch.setattr(checkpoint, "load_checkpoint", no_load)
    out = tmp_path / "mine"
    users_directory(out)
    assert convert(["to-hf", str(SHIPPED), str(out)]) == 2
    assert sorted(os.listdir(tmp_path)) == ["mine"]
