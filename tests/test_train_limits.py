"""The trainer's limits and statuses: settings it cannot hold are refused up front with a message,
and every way a run ends leaves status.json saying so.

Most checks are in-process (train_args.validate, run_files); the end-to-end ones start the real
trainer on the numbers task, some with a fault injected into its process (train_helpers.patched_cmd).
"""
from __future__ import annotations

import json

import pytest

from explorer import train
from explorer.config import TrainConfig
from explorer.train_args import parse_config, validate


# ---- non-finite and absurd numbers ------------------------------------------------------------------
@pytest.mark.parametrize("content, flags, message", [
    ({}, ["--epochs", "inf"], "epochs must be a finite number, not inf"),
    ({"epochs": float("inf")}, [], "epochs must be a finite number, not inf"),
    ({}, ["--epochs", "nan"], "epochs must be a finite number, not nan"),
    ({"lr_factor": float("nan")}, [], "lr_factor must be a finite number, not nan"),
    ({}, ["--lr-factor", "inf"], "lr_factor must be a finite number, not inf"),
    ({"label_smoothing": float("nan")}, [], "label_smoothing must be a finite number, not nan"),
    ({}, ["--dropout", "nan"], "dropout must be a finite number, not nan"),
    ({}, ["--clip-norm", "inf"], "clip_norm must be a finite number, not inf"),
])
def test_non_finite_numbers_are_refused(tmp_path, content, flags, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))                  # json writes NaN / Infinity, and reads them back
    with pytest.raises(ValueError) as err:
        parse_config(["--run-dir", str(tmp_path / "run"), "--config", str(path), *flags])
    assert message in str(err.value)


def test_epochs_inf_exits_2_with_the_reason_not_a_traceback(tmp_path, capsys):
    """It used to pass validate and end in OverflowError (ceil of inf) inside the trainer."""
    code = train.main(["--run-dir", str(tmp_path / "run"), "--dataset", "numbers", "--tokenizer-type", "word",
                       "--threads", "1", "--epochs", "inf"])
    assert code == 2
    assert "epochs must be a finite number, not inf" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_finite_floats_still_pass():
    validate(TrainConfig(epochs=2.5, lr_factor=0.5, label_smoothing=0.0, dropout=0.3, clip_norm=0.0))


def test_absurd_epochs_are_refused():
    from explorer.train_args import MAX_EPOCHS
    validate(TrainConfig(epochs=float(MAX_EPOCHS)))
    with pytest.raises(ValueError, match="epochs must be <= "):
        validate(TrainConfig(epochs=1e300))
