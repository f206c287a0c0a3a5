"""The checkpoint format: exact round trips, atomic saves (even under SIGKILL), clear errors."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_model, save_file

from explorer.store import checkpoint
from explorer.store.checkpoint import CheckpointError, load_checkpoint, load_trainer_state, read_card, save_checkpoint, write_card
from explorer.store.catalog import list_checkpoints
from support.model_helpers import VOCAB, FakeTokenizer, make_model
from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]
META = {"name": "tiny-test", "src_lang": "en", "tgt_lang": "de",
        "training": {"step": 500, "epoch": 1, "dataset": "numbers", "preset": "tiny"}}


def save(path, model, tok=None, **kw) -> Path:
    return save_checkpoint(path, model, tok or FakeTokenizer(), meta=META, **kw)


def states_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def debris(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_float32_round_trip_is_bit_exact(tmp_path, fake_tokenizer, batch):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    model.logits(*batch).sum().backward()
    opt.step()
    model.eval()
    state = {"step": 7, "optimizer": opt.state_dict(), "rng_cpu": torch.get_rng_state(), "best": None}
    path = save(tmp_path / "ck", model, trainer_state=state, card={"bleu": 12.5})
    loaded = load_checkpoint(path)
    assert states_equal(loaded.model, model)
    assert not loaded.model.training and loaded.model.encoder.embed.lookup.weight.dtype == torch.float32
    assert loaded.model.generator.proj.weight is loaded.model.encoder.embed.lookup.weight   # still tied
    with torch.no_grad():
        assert torch.equal(loaded.model(*batch), model(*batch))
    assert loaded.config == model.cfg and loaded.name == "tiny-test" and loaded.path == path
    assert loaded.meta["training"]["step"] == 500 and loaded.meta["dtype"] == "float32"
    assert loaded.meta["tokenizer"] == {"files": [FakeTokenizer.FILE], "joint": True}
    assert loaded.card == {"bleu": 12.5} and isinstance(loaded.tokenizer, FakeTokenizer)
    full = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    assert len(loaded.sha256) == 12 and full.startswith(loaded.sha256)
    resumed = load_trainer_state(path)                                        # weights_only=True inside
    assert resumed["step"] == 7 and torch.equal(resumed["rng_cpu"], state["rng_cpu"])
    fresh = torch.optim.Adam(make_model(seed=5).parameters())
    fresh.load_state_dict(resumed["optimizer"])
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    other = make_model(seed=9)                                                # the file is plain safetensors
    load_model(other, str(path / "model.safetensors"))
    assert states_equal(other, model)


def test_float16_storage_upcasts_and_leaves_the_live_model_alone(tmp_path, fake_tokenizer):
    model = make_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    save(tmp_path / "f32", model)
    path = save(tmp_path / "f16", model, dtype=torch.float16)
    assert all(v.dtype == torch.float32 and torch.equal(v, before[k]) for k, v in model.state_dict().items())
    loaded = load_checkpoint(path)
    assert loaded.meta["dtype"] == "float16"
    for k, v in loaded.model.state_dict().items():
        assert v.dtype == torch.float32 and torch.equal(v, before[k].half().float()), k
    size = lambda p: (p / "model.safetensors").stat().st_size
    assert size(path) < 0.6 * size(tmp_path / "f32")


def test_a_weight_past_float16_s_range_is_refused_saying_how_to_keep_it(tmp_path, fake_tokenizer):
    """It said "values overflow torch.float16; save in float32", where the command's option is --dtype float32."""
    model = make_model()
    with torch.no_grad():
        next(model.parameters())[0] = 1e6                              # float16's largest is 65,504
    with pytest.raises(ValueError, match=r"values past float16's range; save in float32 \(python -m explorer "
                                         r"convert: --dtype float32\)"):
        save(tmp_path / "f16", model, dtype=torch.float16)
    assert not (tmp_path / "f16").exists()


def test_save_failing_midway_keeps_the_previous_checkpoint(tmp_path, fake_tokenizer, monkeypatch):
    old, new = make_model(seed=1), make_model(seed=2)
    path = save(tmp_path / "ck", old)

    def half_then_fail(tensors, filename, metadata=None):
        save_file(tensors, filename, metadata)
        with open(filename, "r+b") as f:
            f.truncate(os.path.getsize(filename) // 2)
        raise OSError("disk full (simulated)")

    with monkeypatch.context() as patch, pytest.raises(OSError, match="simulated"):
        patch.setattr(checkpoint, "save_file", half_then_fail)
        save(path, new)
    assert states_equal(load_checkpoint(path).model, old) and debris(tmp_path) == []

    real_rename, calls = os.rename, []

    def fail_moving_new_in(src, dst):                 # the old one is already aside at this point
        calls.append(dst)
        if ".tmp-" in str(src):
            raise OSError("rename failed (simulated)")
        return real_rename(src, dst)

    with monkeypatch.context() as patch, pytest.raises(OSError, match="simulated"):
        patch.setattr(os, "rename", fail_moving_new_in)
        save(path, new)
    assert any(".old-" in str(d) for d in calls)
    assert states_equal(load_checkpoint(path).model, old) and debris(tmp_path) == []

    for opaque in (Path("x"), lambda: 0):             # need pickle: refused before anything is swapped
        with pytest.raises(ValueError, match="trainer_state"):
            save(path, new, trainer_state={"thing": opaque})
    assert states_equal(load_checkpoint(path).model, old) and debris(tmp_path) == []


KILLER = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = [{root!r}, {tests!r}]
    from safetensors.torch import save_file
    from explorer.store import checkpoint
    from support.model_helpers import FakeTokenizer, make_model
    stage, path = sys.argv[1], sys.argv[2]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    real_rename = os.rename
    def rename(src, dst):
        real_rename(src, dst)
        if (stage == "aside" and ".old-" in str(dst)) or (stage == "swapped" and ".tmp-" in str(src)):
            die()
    def half_written(tensors, filename, metadata=None):
        save_file(tensors, filename, metadata)
        with open(filename, "r+b") as f:
            f.truncate(os.path.getsize(filename) // 2)
        die()
    os.rename = rename
    if stage == "weights":
        checkpoint.save_file = half_written
    checkpoint.save_checkpoint(path, make_model(seed=2), FakeTokenizer(), meta={{"name": "new"}})
""")


@pytest.mark.parametrize("stage,survivor", [("weights", "old"), ("aside", "old"), ("swapped", "new")])
def test_writer_killed_mid_save_leaves_a_whole_checkpoint(stage, survivor, tmp_path, fake_tokenizer):
    """SIGKILL the writing process at each step of a save; a whole checkpoint always loads."""
    old, new = make_model(seed=1), make_model(seed=2)
    path = save(tmp_path / "ck", old)
    script = KILLER.format(root=str(ROOT), tests=str(ROOT / "tests"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_watched([sys.executable, "-c", script, stage, str(path)], "the writer to be killed", env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert debris(tmp_path), "the kill should have left a temp or aside directory behind"
    expect = old if survivor == "old" else new
    assert states_equal(load_checkpoint(path).model, expect)        # reading never needs a repair first
    [info] = list_checkpoints(tmp_path)
    assert info.error is None and info.path == path
    save(path, make_model(seed=3))                                   # the next save cleans up
    assert debris(tmp_path) == [] and states_equal(load_checkpoint(path).model, make_model(seed=3))


def _edit_config(path: Path, edit) -> None:
    cfg = json.loads((path / "config.json").read_text())
    edit(cfg)
    (path / "config.json").write_text(json.dumps(cfg))


def _damage(kind: str, path: Path) -> str:
    """Damage a saved checkpoint one way; returns the file name the error must name."""
    weights = path / "model.safetensors"
    if kind == "missing directory":
        return str(path / "nowhere")
    if kind == "missing weights":
        weights.unlink()
    elif kind == "missing config":
        (path / "config.json").unlink()
        return "config.json"
    elif kind == "bad json":
        (path / "config.json").write_text('{"format_version": 1, "model": {')
        return "config.json"
    elif kind == "unknown config key":
        _edit_config(path, lambda c: c["model"].update(d_modle=64))
        return "config.json"
    elif kind == "wrong shapes":
        _edit_config(path, lambda c: c["model"].update(d_ff=256))
    elif kind == "missing tensor":
        from safetensors.torch import load_file
        tensors = load_file(str(weights))
        tensors.pop("encoder.layers.0.ffn.w_1.bias")
        save_file(tensors, str(weights))
        _edit_config(path, lambda c: c.pop("weights_sha256"))
    elif kind == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) * 2 // 3])
    elif kind == "garbage":
        weights.write_bytes(os.urandom(weights.stat().st_size))
    elif kind == "garbage in data":
        data = bytearray(weights.read_bytes())
        data[-5000:-4000] = os.urandom(1000)
        weights.write_bytes(bytes(data))
    elif kind == "tokenizer missing":
        (path / FakeTokenizer.FILE).unlink()
        return FakeTokenizer.FILE
    elif kind == "tokenizer vocab":
        FakeTokenizer(VOCAB + 10).save(path)
        return FakeTokenizer.FILE
    return "model.safetensors"


DAMAGES = ["missing directory", "missing weights", "missing config", "bad json", "unknown config key",
           "wrong shapes", "missing tensor", "truncated", "garbage", "garbage in data", "tokenizer missing",
           "tokenizer vocab"]


@pytest.mark.parametrize("kind", DAMAGES)
def test_damaged_checkpoint_gives_a_clear_error(kind, tmp_path, fake_tokenizer):
    path = save(tmp_path / "ck", make_model())
    names = _damage(kind, path)
    target = Path(names) if os.path.isabs(names) else path
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(target)
    message = str(err.value)
    assert names in message, message
    assert "Traceback" not in message and err.value.__cause__ is None
    [info] = list_checkpoints(tmp_path) or [None]
    if kind not in ("missing directory", "missing config"):
        assert info is not None and info.error and names in info.error     # listed as damaged, not raised


@pytest.mark.parametrize("file", ["weights", "tokenizer"])
@pytest.mark.parametrize("kind, said", [("fifo", "a FIFO (named pipe), not a regular file"),
                                        ("folder", "a directory, not a regular file"),
                                        ("dangling link", "a broken symbolic link")])
def test_a_weights_or_tokenizer_file_that_is_there_but_no_file_is_not_called_missing(
        file, kind, said, tmp_path, fake_tokenizer):
    """A FIFO or a folder in place of the weights was said to be 'file missing': the user looked for a
    file that was there."""
    path = save(tmp_path / "ck", make_model())
    target = path / ("model.safetensors" if file == "weights" else FakeTokenizer.FILE)
    target.unlink()
    {"fifo": os.mkfifo, "folder": os.mkdir, "dangling link": lambda p: os.symlink(tmp_path / "gone", p)}[kind](target)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert str(err.value).startswith(f"{target}: ") and said in str(err.value) and "missing" not in str(err.value)


def test_save_never_replaces_a_directory_that_is_not_a_checkpoint(tmp_path, fake_tokenizer):
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "todo.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a checkpoint"):
        save(precious, make_model())
    assert (precious / "todo.txt").read_text() == "keep me" and debris(tmp_path) == []
    (tmp_path / "empty").mkdir()
    assert load_checkpoint(save(tmp_path / "empty", make_model())).name == "tiny-test"


def test_trainer_state_and_card(tmp_path, fake_tokenizer):
    path = save(tmp_path / "ck", make_model())
    with pytest.raises(CheckpointError, match="trainer_state.pt"):
        load_trainer_state(path)
    assert read_card(path) is None
    write_card(path, {"test": {"bleu": 31.2, "chrf": 55.0}})
    write_card(path, {"test": {"bleu": 31.4, "chrf": 55.1}})
    assert read_card(path) == {"test": {"bleu": 31.4, "chrf": 55.1}}
    assert sorted(p.name for p in path.iterdir()) == ["card.json", "config.json", FakeTokenizer.FILE,
                                                       "model.safetensors"]
    (path / "card.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="card.json"):
        read_card(path)


def test_list_checkpoints_finds_nested_runs_and_reports_damage(tmp_path, fake_tokenizer, monkeypatch):
    model = make_model()
    save(tmp_path / "checkpoints" / "numbers-en-de", model, card={"exact_match": 0.99})
    save(tmp_path / "runs" / "r1" / "checkpoints" / "step_000500", model)
    save(tmp_path / "runs" / "r1" / "checkpoints" / "step_001000", model, dtype=torch.float16)
    save(tmp_path / "runs" / "demo" / "poisoned" / "checkpoints" / "step_000300", model)   # 4 levels: found
    save(tmp_path / "runs" / "deep" / "a" / "b" / "c" / "d", model)             # 5 levels: too deep
    broken = tmp_path / "checkpoints" / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    monkeypatch.chdir(tmp_path)
    default = list_checkpoints()
    assert [i.path.name for i in default] == ["broken", "numbers-en-de"]
    infos = {i.path.name: i for i in list_checkpoints("checkpoints", "runs", "missing-root")}
    assert sorted(infos) == ["broken", "numbers-en-de", "step_000300", "step_000500", "step_001000"]
    assert "config.json" in infos["broken"].error and infos["broken"].n_params is None
    good = infos["numbers-en-de"]
    assert good.error is None and good.name == "tiny-test" and good.card == {"exact_match": 0.99}
    assert good.n_params == model.num_parameters() and good.created and good.meta["src_lang"] == "en"
    assert infos["step_001000"].size_bytes < 0.6 * infos["step_000500"].size_bytes


def test_round_trip_with_the_real_sentencepiece_tokenizer(tmp_path):
    tokenizer_mod = pytest.importorskip("explorer.text.tokenizer")
    lines = ["one two three four five six seven eight nine ten",
             "eins zwei drei vier fuenf sechs sieben acht neun zehn"] * 5
    tok = tokenizer_mod.Tokenizer.train(lines, lines, vocab_size=60, model_type="bpe")
    model = make_model(src_vocab_size=60, tgt_vocab_size=60)
    path = save_checkpoint(tmp_path / "real", model, tok, meta=META, dtype=torch.float16)
    loaded = load_checkpoint(path)
    assert loaded.meta["tokenizer"] == {"files": ["tokenizer.model"], "joint": True}
    assert loaded.tokenizer.encode("drei vier") == tok.encode("drei vier")
    mismatched = save_checkpoint(tmp_path / "mismatch", make_model(), tok, meta=META)   # model vocab 40
    with pytest.raises(CheckpointError, match=r"tokenizer\.model.*60"):
        load_checkpoint(mismatched)


def test_model_skeleton_has_the_models_structure_without_importing_dynamo():
    """The skeleton behind checkpoint listing: same names and shapes, and cheap (no torch._dynamo)."""
    import subprocess
    import sys

    from explorer.model import model_skeleton

    cfg = make_model().cfg
    real, skeleton = make_model().state_dict(), model_skeleton(cfg).state_dict()
    assert {k: tuple(v.shape) for k, v in skeleton.items()} == {k: tuple(v.shape) for k, v in real.items()}
    code = ("import sys; from explorer.config import preset; from explorer.model import model_skeleton; "
            "model_skeleton(preset('small')); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_damaged_sentencepiece_file_is_named_once(tmp_path):
    """'.../tokenizer.model: cannot load tokenizer: tokenizer.model: not a sentencepiece model' named it twice."""
    import shutil

    source = Path(__file__).resolve().parents[2] / "checkpoints" / "numbers-en-de"
    if not (source / "model.safetensors").is_file():
        pytest.skip("needs the shipped checkpoint numbers-en-de")
    path = tmp_path / "ck"
    shutil.copytree(source, path)
    (path / "tokenizer.model").write_bytes(b"\x08\x01garbage" * 50)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    said = str(err.value)
    assert said == f"{path}: cannot load tokenizer: tokenizer.model: not a sentencepiece model (damaged or of another kind)"
