"""The trainer as a process: smoke run, checkpoints kept, kill -9 + --resume, SIGTERM, NaN guard, lock,
config file + flags, invalid settings, and `python -m explorer.evaluate` on a trained checkpoint.

Each run is the real `python -m explorer.train` on the numbers task (tiny preset, tiny step counts).
"""
from __future__ import annotations

import contextlib
import json
import signal
import sys

import pytest
import torch

from explorer.files.atomic import write_json_atomic
from explorer.store import run_files as rf
from explorer.store import run_paths as rp
from explorer import train
from explorer.training.saving import prune_checkpoints
from explorer.training.args import parse_config
from explorer.store.checkpoint import load_checkpoint, load_trainer_state
from support.train_helpers import (checkpoint_steps, finish, losses, numbers_tokenizer, run,  # noqa: F401
                                   seed_tokenizer, start, status, train_records, trainer_cmd, wait_for)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, numbers_tokenizer):
    """30 steps from a JSON config file whose max_steps / keep_last the flags override."""
    root = tmp_path_factory.mktemp("smoke")
    config = root / "config.json"
    config.write_text(json.dumps({"max_steps": 1000, "keep_last": 9, "save_every": 10, "eval_every": 10,
                                  "eval_sentences": 6, "label_smoothing": 0.05, "seed": 7}))
    run_dir = seed_tokenizer(root / "run", numbers_tokenizer)
    proc = run(trainer_cmd(run_dir, "--config", str(config), "--max-steps", "30", "--keep-last", "2",
                           "--eval-every", "10"))
    return run_dir, proc


@pytest.mark.slow
def test_smoke_run_loss_falls_and_run_files_are_written(smoke):
    run_dir, proc = smoke
    assert proc.returncode == 0, proc.stderr
    assert "finished: step 30/30" in proc.stdout
    st = status(run_dir)
    assert st["state"] == "finished" and st["step"] == 30 and st["total_steps"] == 30
    recs = train_records(run_dir)
    assert [r["step"] for r in recs] == list(range(1, 31))
    first, last = [r["loss"] for r in recs[:5]], [r["loss"] for r in recs[-5:]]
    assert sum(last) / 5 < 0.8 * sum(first) / 5, (first, last)
    assert all(r["tokens_per_s"] > 0 and r["lr"] > 0 for r in recs)
    evals = [r for r in rf.read_metrics(run_dir) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [10, 20, 30]
    assert all({"bleu", "chrf", "dev_loss", "exact"} <= set(r) for r in evals)


@pytest.mark.slow
def test_config_file_values_and_flag_overrides_are_saved(smoke):
    run_dir, proc = smoke
    saved = json.loads((run_dir / rp.CONFIG).read_text())
    assert saved["max_steps"] == 30 and saved["keep_last"] == 2          # flags win
    assert saved["label_smoothing"] == 0.05 and saved["seed"] == 7         # the file's values
    assert saved["save_every"] == 10 and saved["log_every"] == 1


@pytest.mark.slow
def test_keep_last_k_checkpoints_and_the_best(smoke):
    run_dir, _ = smoke
    evals = [r for r in rf.read_metrics(run_dir) if r["kind"] == "eval"]
    best = max(evals, key=lambda r: (r["bleu"], -r["step"]))["step"]      # the first step with the top BLEU
    assert set(checkpoint_steps(run_dir)) == {20, 30, best}
    assert status(run_dir)["best_step"] == best
    for step in checkpoint_steps(run_dir):
        path = run_dir / "checkpoints" / f"step_{step:06d}"
        state = load_trainer_state(path)
        assert state["step"] == step
        assert load_checkpoint(path).meta["training"]["step"] == step


def test_prune_keeps_last_k_and_best(tmp_path):
    """The pruning rule alone, with the best checkpoint outside the last K."""
    for step in (10, 20, 30, 40, 50):
        d = tmp_path / rp.CHECKPOINTS / f"step_{step:06d}"
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        (d / "model.safetensors").write_text("")
    prune_checkpoints(tmp_path, keep_last=2, best_step=20)
    assert [p.name for p in rp.checkpoint_dirs(tmp_path)] == ["step_000020", "step_000040", "step_000050"]


@pytest.mark.slow
def test_kill9_then_resume_continues_with_identical_losses(tmp_path, numbers_tokenizer):
    ref_dir = seed_tokenizer(tmp_path / "reference", numbers_tokenizer)
    run_dir = seed_tokenizer(tmp_path / "killed", numbers_tokenizer)
    reference = start(trainer_cmd(ref_dir, "--max-steps", "20", "--save-every", "4"))
    victim = start(trainer_cmd(run_dir, "--max-steps", "1000", "--save-every", "4"))
    try:
        wait_for(lambda: any(s >= 8 for s in checkpoint_steps(run_dir)), victim, "a checkpoint at step 8", run_dir)
        victim.send_signal(signal.SIGKILL)
        finish(victim, "the killed trainer to be reaped", run_dir)
    finally:
        victim.kill()
    assert victim.returncode == -signal.SIGKILL
    resumed_at = checkpoint_steps(run_dir)[-1]
    assert 8 <= resumed_at < 20
    killed_losses = losses(run_dir)
    assert max(killed_losses) >= resumed_at        # it was killed mid-run, after its last checkpoint

    proc = run(trainer_cmd(run_dir, "--resume", "--max-steps", "20"))
    assert proc.returncode == 0, proc.stderr
    assert f"at step {resumed_at} " in proc.stdout
    ref_out, ref_err = finish(reference, "the reference trainer", ref_dir)
    assert reference.returncode == 0, ref_err

    expected, got = losses(ref_dir), losses(run_dir)
    steps = [r["step"] for r in train_records(run_dir)]
    assert steps == list(range(1, 21))             # records after the checkpoint were dropped, not doubled
    assert got[resumed_at + 1] == expected[resumed_at + 1]     # the next step, bit for bit
    assert got == expected                         # and every step before and after
    assert status(run_dir)["state"] == "finished" and status(run_dir)["step"] == 20
    a = load_checkpoint(ref_dir / "checkpoints" / "step_000020").model.state_dict()
    b = load_checkpoint(run_dir / "checkpoints" / "step_000020").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_sigterm_saves_at_current_step_and_exits_cleanly(tmp_path, numbers_tokenizer):
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    proc = start(trainer_cmd(run_dir, "--max-steps", "1000", "--save-every", "0"))
    try:
        wait_for(lambda: status(run_dir).get("step", 0) >= 3, proc, "step 3", run_dir)
        assert rf.RunLock(run_dir).is_held_by_other()
        proc.send_signal(signal.SIGTERM)
        out, err = finish(proc, "the trainer to save and exit after SIGTERM", run_dir)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    st = status(run_dir)
    assert st["state"] == "stopped" and 3 <= st["step"] < 1000
    assert checkpoint_steps(run_dir) == [st["step"]]          # save_every=0: only the stop saved one
    assert load_trainer_state(run_dir / "checkpoints" / f"step_{st['step']:06d}")["step"] == st["step"]
    assert f"stopped: step {st['step']}/1000" in out
    assert not rf.RunLock(run_dir).is_held_by_other()


@pytest.mark.slow
def test_non_finite_loss_fails_the_run_at_that_step(tmp_path, numbers_tokenizer):
    """lr 1e30: Adam moves every weight by ~lr on step 1, so step 2's forward overflows to NaN."""
    run_dir = seed_tokenizer(tmp_path / "run", numbers_tokenizer)
    proc = run(trainer_cmd(run_dir, "--max-steps", "50", "--warmup", "1", "--lr-factor", "1e30",
                           "--save-every", "1"))
    assert proc.returncode == 1
    assert "non-finite loss" in proc.stderr
    st = status(run_dir)
    assert st["state"] == "failed" and st["failed_step"] == 2 and st["step"] == 1
    assert "non-finite loss" in st["last_error"] and "step 2" in st["last_error"]
    assert checkpoint_steps(run_dir) == [1]                   # nothing saved from the broken step
    assert list(losses(run_dir)) == [1]


@pytest.mark.slow
def test_second_trainer_on_a_locked_run_dir_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    holder = rf.RunLock(run_dir)
    assert holder.acquire()                       # as a running trainer holds it
    try:
        proc = run(trainer_cmd(run_dir, "--max-steps", "5"))
    finally:
        holder.release()
    assert proc.returncode != 0
    assert "refused: another trainer holds" in proc.stderr and str(run_dir) in proc.stderr
    assert not (run_dir / rp.STATUS).exists() and not (run_dir / rp.CONFIG).exists()


@pytest.mark.parametrize("flags, message", [
    (["--warmup", "0"], "warmup must be >= 1"),
    (["--batch-tokens", "lots"], "invalid int value"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_invalid_setting_exits_2_with_the_reason(tmp_path, capsys, flags, message):
    """In-process: argparse and validate() refuse before the trainer touches anything."""
    with pytest.raises(SystemExit) if "--warmup" not in flags else contextlib.nullcontext() as refused:
        code = train.main(["--run-dir", str(tmp_path / "run"), *flags])
    assert (refused.value.code if refused else code) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("content, flags, message", [
    ({"max_steps": 5, "warmpu": 10}, [], "unknown TrainConfig key(s): warmpu"),
    ({"max_steps": "lots"}, [], "max_steps must be int"),
    ({"bf16": "yes"}, [], "bf16 must be bool"),
    ({"label_smoothing": 1.5}, [], "label_smoothing must be in [0, 1)"),
    ({"tokenizer_type": "chars"}, [], "tokenizer_type must be"),
    ({"preset": "huge"}, [], "unknown preset 'huge'"),
    ({"keep_last": 3}, ["--keep-last", "0"], "keep_last must be >= 1"),
    ({}, ["--log-every", "0"], "log_every must be >= 1"),
    ("[1, 2]", [], "must hold a JSON object"),
    ("{not json", [], "is not valid JSON"),
])
def test_bad_config_is_refused_with_exit_code_2(tmp_path, capsys, content, flags, message):
    path = tmp_path / "config.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    assert train.main(["--run-dir", str(tmp_path / "run"), "--config", str(path), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_missing_config_file_is_refused(tmp_path, capsys):
    assert train.main(["--run-dir", str(tmp_path / "run"), "--config", str(tmp_path / "nope.json")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def test_flags_override_the_file_and_resume_reads_the_saved_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"max_steps": 100, "warmup": 7, "bf16": True}))
    cfg, resume = parse_config(["--config", str(path), "--max-steps", "9", "--no-bf16",
                                      "--run-dir", str(tmp_path)])
    assert (cfg.max_steps, cfg.warmup, cfg.bf16, resume) == (9, 7, False, False)
    write_json_atomic(tmp_path / rp.CONFIG, cfg.to_dict())
    cfg2, resume2 = parse_config(["--run-dir", str(tmp_path), "--resume", "--max-steps", "20"])
    assert resume2 and cfg2.warmup == 7 and cfg2.max_steps == 20


@pytest.mark.slow
def test_evaluate_cli_prints_scores_and_writes_the_card(smoke, tmp_path):
    """The card's test figures are its held-out split's (here a test.tsv beside it, as `ship` leaves one): a
    trial on part of it, or another file, is printed and keeps them."""
    import shutil

    from explorer.store.checkpoint import read_card
    from explorer.evaluation.command import main as evaluate_main

    run_dir, _ = smoke
    ckpt = tmp_path / "step_000030"
    shutil.copytree(run_dir / "checkpoints" / "step_000030", ckpt)
    (ckpt / "test.tsv").write_text("twenty one\tein und zwanzig\nthree hundred\tdrei hundert\nseven\tsieben\n")
    proc = run([sys.executable, "-m", "explorer.evaluate", str(ckpt), "--beam", "2"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any("greedy" in ln and "BLEU" in ln and "chrF" in ln for ln in lines), proc.stdout
    assert any("beam2" in ln and "BLEU" in ln and "chrF" in ln for ln in lines), proc.stdout
    card = read_card(ckpt)["test"]
    assert card["n"] == 3 and card["test_set"] == "test.tsv"
    for label in ("greedy", "beam2"):
        assert 0 <= card[label]["bleu"] <= 100 and 0 <= card[label]["chrf"] <= 100
    written = (ckpt / "card.json").read_bytes()
    assert evaluate_main([str(ckpt), "--test", str(ckpt / "test.tsv"), "--limit", "2", "--beam", "2"]) == 0
    assert (ckpt / "card.json").read_bytes() == written                  # a trial on part of it: kept
    other = tmp_path / "other.tsv"
    other.write_text("seven\tsieben\n")
    assert evaluate_main([str(ckpt), "--test", str(other), "--beam", "2"]) == 0
    assert (ckpt / "card.json").read_bytes() == written                  # another file: printed, kept
    assert evaluate_main([str(ckpt), "--test", str(tmp_path / "missing.tsv")]) == 2
